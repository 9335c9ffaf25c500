"""The built-in features as plugins a bot opts into with one line, each built from the settings when the bot is
deployed (``bots run``, ``bots worker``...): ``Bot(plugins=[plugins.usage(), plugins.limits()])``, or
``plugins.standard()`` for everything the built-in assistant has.

A plugin here is a ``FromSettings``: a placeholder the deployment replaces (``resolve``) with the plugins of
``core`` configured from the settings and the deployment's stores (this process's, or Redis in a fleet). A bot
without plugins runs none: no limits, no usage counters, no trust policy, no schedules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import SecretStr

from core.errors import ConfigError
from core.limits import LimitConfig, Limiter
from core.loop_guard import LoopGuard
from core.media import MediaLimits, MediaReader, OpenAITranscriber
from core.plugin import Brings, Plugin
from core.trust import Tier, Trust
from extensions.chat.i18n import say

from .history_search import search_history

if TYPE_CHECKING:
    from core import Dispatcher, Setup, UsageStore
    from core.approvals import ApprovalStore
    from core.facts import FactStore
    from core.limits import LimitStore
    from core.memory import HistoryStore
    from core.schedules import Clock, ScheduleStore
    from core.summary import SummaryLock, SummaryPolicy

    from .settings import Settings

__all__ = (
    "Deployment",
    "FromSettings",
    "approvals",
    "build_limiter",
    "build_media",
    "build_trust",
    "catchup",
    "facts",
    "history_search",
    "knowledge",
    "limits",
    "long_memory",
    "mcp",
    "media",
    "pictures",
    "resolve",
    "sandbox",
    "sandbox_problem",
    "schedules",
    "set_up",
    "skills",
    "spoken_replies",
    "standard",
    "teamwork",
    "trust",
    "usage",
    "webhooks",
)

log = logging.getLogger("bots.plugins")


@dataclass(kw_only=True)
class Deployment:
    """What the plugins are built from: the settings and where this deployment keeps things."""

    settings: Settings
    """The operator's settings."""
    dispatcher: Dispatcher | None = None
    """How inputs reach runs (None: in this process)."""
    usage: UsageStore
    """Where usage is counted (SQLite in one process, Redis in a fleet)."""
    limit_store: LimitStore | None = None
    """Where the message counts of the limits are kept (None: this process's memory)."""
    history: HistoryStore | None = None
    """Where the full history is kept (None: not kept)."""
    summary: SummaryPolicy | None = None
    """When and how conversations are summarized (``BOT_SUMMARY_EVERY``, ``LLM_SUMMARY_MODEL``)."""
    summary_lock: SummaryLock | None = None
    """Who may summarize a conversation now, when several processes share the history (Redis in a fleet)."""
    schedules: ScheduleStore | None = None
    """Where schedules live (None: the memory store, one process; a fleet passes Redis)."""
    fire_schedules: bool = True
    """This process fires the due schedules (a gateway does not)."""
    schedules_clock: Clock | None = None
    """What time it is for the schedules (a test's ``ManualClock``)."""
    approvals: ApprovalStore | None = None
    """Where calls waiting for an approval live (None: the memory store, one process)."""
    sweep_approvals: bool = True
    """This process times approval requests out (a gateway does not)."""
    tools: bool = True
    """This process runs actions (a gateway does not): the MCP servers are connected."""
    facts: FactStore | None = None
    """Where facts live (None: the memory store in one process, the queue's Redis in a fleet)."""
    listen: bool = True
    """This process takes what comes from outside (a gateway, ``bots run``; a worker does not): webhooks."""

    @property
    def distributed(self) -> bool:
        """Inputs go through a shared queue."""
        return self.dispatcher is not None and self.dispatcher.distributed


class FromSettings(Plugin):
    """A feature the deployment builds from the settings (``resolve``); until then it takes no part in runs."""

    def __init__(
        self,
        name: str,
        build: Callable[[Deployment], Sequence[Plugin]],
        *,
        setup: Callable[[Setup, Deployment], None] | None = None,
    ) -> None:
        self.name = name  # type: ignore[misc]  # (each instance names its feature)
        self.build = build
        """The plugins of the feature, from the deployment."""
        self.setup = setup
        """What the feature sets up on the agent once it is built (a service that fires schedules), or None."""

    def attach(self, host: Setup) -> None:
        log.warning(  # (once, when the agent is built: the placeholder takes no part in its runs)
            "plugin %s is built from the settings by `bots run`; in create_agent, pass core's plugins instead",
            self.name,
        )


def resolve(plugins: Sequence[Plugin], deployment: Deployment) -> list[Plugin]:
    """``plugins`` with each ``FromSettings`` replaced by what it builds for ``deployment``."""
    found: list[Plugin] = []
    for plugin in plugins:
        found.extend(plugin.build(deployment) if isinstance(plugin, FromSettings) else (plugin,))
    return found


def set_up(plugins: Sequence[Plugin], agent: Setup, deployment: Deployment) -> None:
    """Set up on ``agent`` what the ``FromSettings`` among ``plugins`` need once it is built."""
    for plugin in plugins:
        if isinstance(plugin, FromSettings) and plugin.setup is not None:
            plugin.setup(agent, deployment)


def _notice(language: str | None, action: str, tier: Tier, needed: Tier | None) -> str:
    if needed is None:
        return say("action_refused_nobody", language, action=action)
    return say("action_refused", language, action=action, needed=needed.value, tier=tier.value)


def build_trust(settings: Settings) -> Trust:
    """Who may call which action (``ACTIONS_POLICY``; ``ConfigError`` when it cannot be read), the refusals told
    in the chat's language."""
    try:
        policy = settings.actions.parsed()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Trust(policy=policy, owners=settings.bot.admins, notice=_notice)


def build_limiter(settings: Settings, store: LimitStore | None = None) -> Limiter:
    """The limits of ``BOT_*`` and the admin users; messages are counted in ``store`` (this process's memory by
    default; a worker passes Redis), tokens are read from the agent's usage store."""
    bot = settings.bot
    config = LimitConfig(
        messages_per_minute=bot.messages_per_minute,
        tokens_per_day_user=bot.tokens_per_day_user,
        tokens_per_day_conversation=bot.tokens_per_day_conversation,
        max_input_chars=bot.max_input_chars,
        admins=bot.admins,
    )
    return Limiter(config, store)


def build_media(settings: Settings) -> MediaReader:
    """What the bot reads of attachments (``MEDIA_*``), and speech to text when ``STT_BASE_URL`` is set."""
    media, stt = settings.media, settings.stt
    limits = MediaLimits(
        image_bytes=int(media.max_image_mb * 1_000_000),
        audio_bytes=int(media.max_audio_mb * 1_000_000),
        file_bytes=media.max_file_kb * 1000,
        text_chars=media.max_text_chars,
        fetch_retries=media.fetch_retries,
        fetch_timeout=media.fetch_timeout,
        kinds=frozenset(media.read),
    )
    transcriber = None
    base_url = (stt.base_url or "").strip()
    if base_url:
        key = stt.api_key.get_secret_value().strip() if stt.api_key is not None else ""
        transcriber = OpenAITranscriber(base_url=base_url, model=stt.model, api_key=key or None, timeout=stt.timeout)
    return MediaReader(limits=limits, transcriber=transcriber, echo=stt.echo and transcriber is not None)


def usage() -> FromSettings:
    """Tokens and costs per day, per user, conversation and model (``/stats``, ``LLM_PRICES``)."""
    from core import Price
    from core.usage.plugin import Usage

    def build(d: Deployment) -> list[Plugin]:
        prices = {
            name: Price(input=rates[0], output=rates[1], cached_input=rates[2] if len(rates) > 2 else None)
            for name, rates in d.settings.llm.prices.items()
        }
        return [Usage(d.usage, prices=prices)]

    return FromSettings("usage", build)


def limits() -> FromSettings:
    """Per-user and per-conversation limits (``BOT_MESSAGES_PER_MINUTE``, ``BOT_TOKENS_PER_DAY_*``,
    ``BOT_MAX_INPUT_CHARS``); the token limits read the usage counters."""
    from core.limits.plugin import Limits

    return FromSettings("limits", lambda d: [Limits(build_limiter(d.settings, d.limit_store), usage=d.usage)])


def trust() -> FromSettings:
    """Trust tiers and the operator's action policy (``ACTIONS_POLICY``, ``BOT_ADMIN_USERS``)."""
    from core.trust.plugin import TrustGuard

    return FromSettings("trust", lambda d: [TrustGuard(build_trust(d.settings))])


def approvals() -> FromSettings:
    """Calls an admin approves first (``ACTIONS_POLICY``'s ``approve``, ``ACTIONS_APPROVAL_*``); with ``trust()``."""
    from core.approvals import ApprovalDesk
    from core.schedules import SyncedClock

    def build(d: Deployment) -> list[Plugin]:
        if d.approvals is None and d.distributed:
            return []  # a queued agent without a shared store refuses such calls (the gateway keeps none)
        desk = ApprovalDesk(
            d.approvals,
            timeout=d.settings.actions.approval_timeout,
            admin_chats=d.settings.actions.admin_chats(),
            sweep=d.sweep_approvals,
        )
        server = d.schedules_clock
        if isinstance(server, SyncedClock):  # a fleet's worker: requests time out by the Redis primary's clock
            desk.clock, desk.sync = lambda: server.now().timestamp(), server.sync
        return [Brings(desk.extension())]

    return FromSettings("approvals", build)


def schedules() -> FromSettings:
    """Reminders and scheduled messages (``BOT_SCHEDULES*``): fired through each conversation's inbox; a scheduled
    text is posted as written."""
    from core.schedules.plugin import ScheduledTexts

    def build(d: Deployment) -> list[Plugin]:
        return [ScheduledTexts()] if d.schedules is not None or not d.distributed else []

    def setup(agent: Setup, d: Deployment) -> None:
        from .schedule_service import attach_schedules

        if d.schedules is not None or not d.distributed:
            attach_schedules(agent, d.settings, d.schedules, fire=d.fire_schedules, clock=d.schedules_clock)

    return FromSettings("schedules", build, setup=setup)


def facts() -> FromSettings:
    """Facts people ask the bot to remember (``remember``, ``recall``, ``/memory``), each its owner's: in one process
    in the memory store, in a fleet in the queue's Redis (every gateway and worker reads the same)."""
    from core.facts import Facts

    def build(d: Deployment) -> list[Plugin]:
        store = d.facts
        if store is None and d.distributed:
            from core.fleet import RedisDispatcher, RedisFactStore

            if not isinstance(d.dispatcher, RedisDispatcher):
                raise ConfigError("facts on a shared queue need its Redis: pass Deployment(facts=...) to keep them")
            store = RedisFactStore(d.dispatcher.backend)
        return [Facts(store)]

    return FromSettings("facts", build)


def media() -> FromSettings:
    """Attachments read (pictures for a model that sees them, voice through speech to text, text files):
    ``MEDIA_*``, ``STT_*``."""
    from core import extension, service
    from core.media.plugin import Media

    def build(d: Deployment) -> list[Plugin]:
        reader = build_media(d.settings)
        found: list[Plugin] = [Media(reader)]
        transcriber = reader.transcriber
        if isinstance(transcriber, OpenAITranscriber):
            stop = service(name="speech-to-text", stop=lambda _agent: transcriber.aclose())
            found.append(Brings(extension(name="speech-to-text", services=[stop])))
        return found

    return FromSettings("media", build)


def _secret(value: SecretStr | None) -> str | None:
    return (value.get_secret_value().strip() or None) if value is not None else None


def pictures() -> FromSettings:
    """The ``make_picture`` action (``IMAGES_*``): a picture made by an OpenAI-compatible images endpoint, posted
    in the conversation, counted per user and day (``IMAGES_PER_DAY_USER``); off without ``IMAGES_BASE_URL``, in
    the processes that run actions."""
    from core import extension, service
    from core.media import OpenAIImages
    from core.media.pictures import Pictures

    def build(d: Deployment) -> list[Plugin]:
        images = d.settings.images
        base_url = (images.base_url or "").strip()
        if not (d.tools and base_url):
            return []
        maker = OpenAIImages(
            base_url=base_url,
            model=images.model,
            api_key=_secret(images.api_key),
            size=images.size,
            timeout=images.timeout,
        )
        stop = service(name="pictures", stop=lambda _agent: maker.aclose())
        plugin = Pictures(
            maker,
            usage=d.usage,
            per_day_user=images.per_day_user,
            limits=d.limit_store,  # (Redis in a fleet: the day's count is atomic across workers)
            admins=d.settings.bot.admins,
        )
        return [plugin, Brings(extension(name="pictures-client", services=[stop]))]

    return FromSettings("pictures", build)


def spoken_replies() -> FromSettings:
    """Answers to voice messages also spoken (``TTS_*``; every answer in a conversation with ``/voice on``): OGG/Opus
    from an OpenAI-compatible ``/audio/speech`` (``TTS_BASE_URL``) or, with ``TTS_ENGINE=espeak``, from the offline
    ``espeak-ng``; at most ``TTS_MAX_CHARS`` characters, counted in usage; off without either."""
    from core import extension, service
    from core.media import OpenAISpeech
    from core.media.espeak import EspeakSpeech
    from core.media.spoken import SpokenReplies

    def build(d: Deployment) -> list[Plugin]:
        tts = d.settings.tts
        base_url = (tts.base_url or "").strip()
        if tts.engine == "espeak":
            offline = EspeakSpeech(voice=tts.voice if "voice" in tts.model_fields_set else "en", timeout=tts.timeout)
            return [
                SpokenReplies(
                    offline,
                    usage=d.usage,
                    max_chars=tts.max_chars,
                    chars_per_day_user=tts.chars_per_day_user,
                    chars_per_day_chat=tts.chars_per_day_chat,
                )
            ]
        if not base_url:
            return []
        speaker = OpenAISpeech(
            base_url=base_url, model=tts.model, voice=tts.voice, api_key=_secret(tts.api_key), timeout=tts.timeout
        )
        stop = service(name="speech", stop=lambda _agent: speaker.aclose())
        plugin = SpokenReplies(
            speaker,
            usage=d.usage,
            max_chars=tts.max_chars,
            chars_per_day_user=tts.chars_per_day_user,
            chars_per_day_chat=tts.chars_per_day_chat,
        )
        return [plugin, Brings(extension(name="speech-client", services=[stop]))]

    return FromSettings("spoken-replies", build)


def long_memory() -> FromSettings:
    """Every input and output kept in the history store (SQLite, or PostgreSQL at ``DATABASE_URL``) and each
    conversation's summary (``BOT_SUMMARY_EVERY``), where the deployment keeps a history."""
    from core.memory.long_memory import LongMemory

    def build(d: Deployment) -> list[Plugin]:
        if d.history is None:
            return []
        return [LongMemory(d.history, summary=d.summary, lock=d.summary_lock)]

    return FromSettings("long-memory", build)


def history_search() -> FromSettings:
    """The ``search_history`` action, where the bot keeps a history to search."""
    from core import extension

    def build(d: Deployment) -> list[Plugin]:
        if d.history is None:
            return []
        return [Brings(extension(name="history-search", actions=[search_history]))]

    return FromSettings("history-search", build)


def knowledge() -> FromSettings:
    """The knowledge base (``KNOWLEDGE_*``, ``bots knowledge``): the ``search_knowledge`` action, and with
    ``KNOWLEDGE_BEFORE_ANSWER`` the best passages in the prompt before every answer; in SQLite under
    ``BOT_DATA_DIR`` in one process, in PostgreSQL at ``DATABASE_URL`` (which a fleet needs for it)."""
    from core.knowledge import Knowledge

    from .knowledge import build_embedder, knowledge_store

    def build(d: Deployment) -> list[Plugin]:
        settings = d.settings
        if not settings.knowledge.enabled:
            return []
        if d.distributed and settings.database.url is None:
            raise ConfigError(
                "KNOWLEDGE_ENABLED in a fleet needs DATABASE_URL: the knowledge base lives in PostgreSQL, where every "
                "worker reads it"
            )
        kb = settings.knowledge
        return [
            Knowledge(
                knowledge_store(settings),
                embedder=build_embedder(settings),
                collections=kb.collections or None,
                before_answer=kb.before_answer,
                limit=kb.limit,
                allow_private_urls=kb.allow_private_urls,
            )
        ]

    return FromSettings("knowledge", build)


def mcp() -> FromSettings:
    """The tools of the MCP servers (``MCP_SERVERS``), in the processes that run actions."""

    def build(d: Deployment) -> list[Plugin]:
        if not (d.tools and d.settings.mcp.enabled):
            return []
        from extensions.mcp import mcp_extension

        return [Brings(mcp_extension(d.settings.mcp))]

    return FromSettings("mcp", build)


def skills() -> FromSettings:
    """The installed skills (``SKILLS_*``, ``bots skills add``), in the processes that run actions: ``use_skill``
    and each script as an action behind the trust tiers and approvals."""

    def build(d: Deployment) -> list[Plugin]:
        if not (d.tools and d.settings.skills.enabled):
            return []
        from extensions.skills import SkillToolset

        toolset = SkillToolset(d.settings.skills, root=d.settings.skills.root(d.settings.bot.data_dir))
        return [Brings(toolset.extension())] if toolset.skills else []

    return FromSettings("skills", build)


def webhooks() -> FromSettings:
    """Events other systems post to ``/hooks/<name>`` on the HTTP endpoint (``WEBHOOKS_*``, ``HTTP_PORT``), each
    answered in the chat its source names; taken by the processes that listen (``bots run``, ``bots gateway``),
    claimed in the queue's Redis in a fleet so that a delivery is queued once whichever gateway gets it."""
    from core import service
    from core.trust import Tier
    from core.webhooks import Webhooks, WebhookSource, WebhookStore

    from .schedules import address_of_channel

    def build(d: Deployment) -> list[Plugin]:
        hooks = d.settings.webhooks
        if not (hooks.enabled and d.listen and hooks.sources):
            return []
        sources = []
        for entry in hooks.sources:
            context, args = address_of_channel(entry.channel)
            sources.append(
                WebhookSource(
                    name=entry.name,
                    secret=entry.secret.get_secret_value(),
                    scheme=entry.scheme,
                    context=context,
                    args=args,
                    prompt=entry.prompt,
                    tier=Tier(entry.tier),
                    max_bytes=hooks.max_bytes,
                    tolerance=hooks.tolerance,
                    per_minute=entry.per_minute or hooks.per_minute,
                    dedupe_seconds=hooks.dedupe_seconds,
                )
            )
        store: WebhookStore | None = None
        if d.distributed:
            from core.fleet import RedisDispatcher
            from core.webhooks.redis_store import RedisWebhookStore

            if not isinstance(d.dispatcher, RedisDispatcher):
                raise ConfigError("WEBHOOKS_ENABLED on a shared queue needs its Redis (a RedisDispatcher)")
            store = RedisWebhookStore(d.dispatcher.backend)
        plugin = Webhooks(sources, store, payload_chars=hooks.payload_chars)

        def start(_agent: Setup) -> None:
            from .ops import ops

            ops.add_webhooks(plugin)

        def stop(_agent: Setup) -> None:
            from .ops import ops

            ops.remove_webhooks(plugin)

        return [
            plugin,
            Brings(extension(name="webhooks-route", services=[service(name="webhooks", start=start, stop=stop)])),
        ]

    from core import extension

    return FromSettings("webhooks", build)


async def sandbox_problem(settings: Settings) -> str | None:
    """Why ``run_code`` would not be offered on this machine although ``SANDBOX_ENABLED`` (``bots config``), or None:
    bubblewrap is missing, or cannot run a program here (no user namespaces in this container)."""
    from core.sandbox import find_sandbox

    if not settings.sandbox.enabled:
        return None
    found, why = find_sandbox(settings.sandbox.bwrap)
    if found is not None:
        why = await found.check() or ""
    return f"SANDBOX_ENABLED but run_code is not offered: {why}" if why else None


def sandbox() -> FromSettings:
    """The ``run_code`` action (``SANDBOX_*``): a short program run under bubblewrap with no network, none of the
    bot's files and hard limits, for the trust tiers of ``SANDBOX_TIERS``, in the processes that run actions; not
    offered where no sandbox works (``bots config`` says why)."""
    from core.sandbox import CodeSandbox, SandboxLimits, find_sandbox

    def build(d: Deployment) -> list[Plugin]:
        box = d.settings.sandbox
        if not (box.enabled and d.tools):
            return []
        found, why = find_sandbox(box.bwrap)
        if found is None:
            log.warning("SANDBOX_ENABLED but run_code is not offered: %s", why)
        mb = 1024 * 1024
        limits = SandboxLimits(
            timeout=box.timeout,
            cpu_seconds=max(1, int(box.timeout + 0.999)),
            memory_bytes=box.memory_mb * mb,
            processes=box.processes,
            output_bytes=box.output_kb * 1024,
            folder_bytes=box.folder_mb * mb,
        )
        tiers = frozenset(Tier(t) for t in box.tiers)
        return [CodeSandbox(found, tiers=tiers, limits=limits, owners=d.settings.bot.admins)]

    return FromSettings("sandbox", build)


def teamwork() -> FromSettings:
    """Tasks between the bots of a fleet (``TEAMWORK_*``): this bot takes tasks in its ``task`` context and, with
    ``TEAMWORK_PEERS``, hands tasks to other bots (``ask_bot``) through their inboxes on the same Redis; needs a
    fleet (``REDIS_URL``): in one process without Redis it does nothing and says so."""
    from core.teamwork import Peer, Teamwork

    def build(d: Deployment) -> list[Plugin]:
        team = d.settings.teamwork
        if not team.enabled:
            return []
        if not d.distributed:
            log.warning("TEAMWORK_ENABLED without REDIS_URL: tasks between bots travel through Redis; nothing is done")
            return []
        import dataclasses

        from core.fleet import RedisBackend, RedisDispatcher
        from core.teamwork.fleet import FleetPeer, RedisAnswerBox

        if not isinstance(d.dispatcher, RedisDispatcher):
            raise ConfigError("TEAMWORK_ENABLED on a shared queue needs its Redis (a RedisDispatcher)")
        backend = d.dispatcher.backend
        peers: dict[str, Peer] = {}
        if d.tools:  # (a worker asks; a gateway only stores inputs)
            for name, prefix in team.peers.items():
                config = dataclasses.replace(backend.config, prefix=prefix)
                peers[name] = FleetPeer(RedisBackend(config, client_name=f"bots-peer-{name}"))
        plugin = Teamwork(
            bot=d.settings.bot.name,
            peers=peers,
            box=RedisAnswerBox(backend),
            max_depth=team.max_depth,
            timeout=team.timeout,
            task_tokens=team.task_tokens,
        )
        return [plugin]

    return FromSettings("teamwork", build)


def catchup() -> FromSettings:
    """``/catchup`` (``CATCHUP_*``): a summary of what a group said since the person's last message or in the period
    they name, with links to the messages where the platform has them (``Platform.message_link``: Telegram
    supergroups, Discord), in the person's private chat when asked (``Platform.private_chat``: Telegram, a Discord
    DM); read from the history (where the deployment keeps one), written by the bot's model in the process that runs
    the conversation."""
    from core.catchup import CatchUp

    from .catchup_settings import message_link, private_chat

    def build(d: Deployment) -> list[Plugin]:
        settings = d.settings.catchup
        if not settings.enabled:
            return []
        if d.history is None:
            log.warning(
                "CATCHUP_ENABLED but this deployment keeps no history (a fleet needs DATABASE_URL): no /catchup"
            )
            return []
        return [
            CatchUp(
                d.history,
                link=message_link,
                private=private_chat,
                max_messages=settings.max_messages,
                max_chars=settings.max_chars,
                default_seconds=int(settings.default_hours * 3600),
            )
        ]

    return FromSettings("catchup", build)


def standard() -> list[Plugin]:
    """Every built-in feature, as the built-in assistant has them (the loop guard first: a repeated call is refused
    before the trust tiers or an approval see it)."""
    return [
        LoopGuard(),
        schedules(),
        usage(),
        limits(),
        trust(),
        approvals(),
        media(),
        pictures(),
        spoken_replies(),
        long_memory(),
        facts(),
        history_search(),
        knowledge(),
        mcp(),
        skills(),
        sandbox(),
        teamwork(),
        webhooks(),
        catchup(),
    ]
