"""Building the bot from settings: the model, the memory store, the extensions and the agent."""

from __future__ import annotations

import dataclasses
import difflib
import logging
from typing import Any

from typing_extensions import Unpack

from core import (
    Agent,
    AgentOptions,
    Bot,
    ChatPolicy,
    Dispatcher,
    Extension,
    InMemoryUsage,
    MemoryStore,
    Model,
    SQLiteStore,
    SQLiteUsage,
    UsageStore,
    create_agent,
    service,
)
from core.agent_options import AgentOptionFields
from core.approvals import ApprovalStore
from core.errors import ConfigError, DefinitionError, MemoryStoreError
from core.limits import LimitStore
from core.memory import HistoryStore, SQLiteHistory
from core.memory.recording import RetentionSweeper
from core.plugin import Plugin
from core.safety import with_safe_defaults
from core.schedules import Clock, ScheduleStore
from core.summary import SummaryLock, SummaryPolicy
from extensions.chat.i18n import LANGUAGE_NAMES
from extensions.chat.trust import TrustRules
from extensions.platforms import Build, all_platforms, platform

from .assistant import persona_text
from .config import check_settings, platform_settings, platforms
from .loading import load_bot
from .models import build_model, close_model, open_model
from .plugins import Deployment, build_limiter, build_media, build_trust, limits, resolve, set_up
from .settings import Settings

__all__ = (
    "build_agent",
    "build_chat_policy",
    "build_extensions",
    "build_history",
    "build_limiter",
    "build_media",
    "build_memory",
    "build_model_from_settings",
    "build_summary_policy",
    "build_trust",
    "build_trust_rules",
    "build_usage",
)

log = logging.getLogger("bots.app")


def build_model_from_settings(settings: Settings) -> Model:
    """The model the settings ask for."""
    return build_model(settings.llm, data_dir=settings.bot.data_dir)


def build_memory(settings: Settings) -> MemoryStore:
    """The embedded default: SQLite under ``BOT_DATA_DIR``."""
    return SQLiteStore(settings.bot.data_dir / "memory.sqlite3")


def build_history(settings: Settings, *, distributed: bool = False) -> HistoryStore | None:
    """Where the full history lives: SQLite under ``BOT_DATA_DIR`` in one process; PostgreSQL at
    ``DATABASE_URL`` when workers share (none without it: distributed mode keeps only the window)."""
    url = settings.database.url.get_secret_value().strip() if settings.database.url is not None else ""
    if url:
        from core.memory.postgres import PostgresHistory

        return PostgresHistory(url)
    if distributed:
        return None
    return SQLiteHistory(settings.bot.data_dir / "memory.sqlite3")


def build_summary_policy(settings: Settings) -> SummaryPolicy:
    """When conversations are summarized (``BOT_SUMMARY_EVERY``) and by which model (``LLM_SUMMARY_MODEL``)."""
    llm = settings.llm
    summary_model: Model | None = None
    name = llm.summary_model.strip()
    if name and name != llm.model.strip() and llm.provider in ("openai", "anthropic"):
        summary_model = build_model(llm.model_copy(update={"model": name, "fallbacks": ()}))
    return SummaryPolicy(
        every=settings.bot.summary_every,
        keep=settings.bot.history,
        timeout=max(llm.timeout * 2, 30.0),
        model=summary_model,
    )


async def _open_history(opener: Any) -> None:
    try:
        await opener()
    except MemoryStoreError as exc:
        log.warning("%s; conversations go on, their history is not kept until it answers", exc)


def build_usage(settings: Settings) -> UsageStore:
    """The embedded default: usage counters in SQLite under ``BOT_DATA_DIR``, next to the memory store."""
    return SQLiteUsage(settings.bot.data_dir / "usage.sqlite3")


def build_chat_policy(settings: Settings) -> ChatPolicy:
    """The operator's rules for settings changed from the chat (``LLM_ALLOWED_MODELS``, ``BOT_LANGUAGE``...)."""
    return ChatPolicy(
        allowed_models=settings.llm.allowed_models,
        default_model=settings.llm.model.strip(),
        persona_max_chars=settings.bot.persona_max_chars,
        languages=tuple(LANGUAGE_NAMES),
        default_language=settings.bot.language,
        default_timezone=settings.bot.timezone,
        disabled_commands=settings.bot.disabled_commands,
        admin_users=settings.bot.admins,
    )


def build_trust_rules(settings: Settings) -> TrustRules:
    """How the adapters give authors their tier and which bots they answer (``BOT_ADMIN_USERS``, ``TRUST_*``)."""
    trust = settings.trust
    return TrustRules(
        owners=settings.bot.admins,
        chat_admins=trust.chat_admins,
        admin_permissions=trust.admin_permissions,
        admin_roles=trust.admin_roles,
        member_users=trust.member_users,
        member_roles=trust.member_roles,
        guest_days=trust.guest_days,
        bots=trust.bots,
        bot_replies=trust.bot_replies,
        bot_window=trust.bot_window,
        cache_seconds=trust.cache_seconds,
    )


def build_extensions(
    settings: Settings,
    *,
    listen: bool = True,
    only: list[str] | None = None,
    web_fleet: dict[str, Any] | None = None,
) -> list[Extension]:
    """One extension per configured platform (or those named in ``only``; ``web_fleet``: the fleet's options,
    ``Build.fleet``: the answers book, the web chat's ``gateway_id``, ``relay`` and visitors). The bot's own
    definitions and features come from its APP."""
    chosen = platforms(settings) if only is None else only
    extensions: list[Extension] = []
    for name in chosen:
        found = platform(name)  # (ConfigError naming the registered platforms for an unknown one)
        build = Build(
            settings=platform_settings(settings, found),
            listen=listen,
            trust=build_trust_rules(settings),
            data_dir=settings.bot.data_dir,
            title=settings.bot.name,
            fleet=web_fleet or {},
        )
        extensions.append(found.build(build))
    return extensions


def safe_plugins(bot: Bot) -> list[Plugin]:
    """The bot's plugins with each safety plugin it lacks and does not go without first (``core.safety``): the loop
    guard, and the operator's limits (``plugins.limits()``, built from the settings)."""
    return with_safe_defaults(
        bot.plugins, without=bot.without, build=lambda d: limits() if d.name == "limits" else None
    )


def _check_options(options: AgentOptionFields) -> None:
    """``TypeError`` naming an option that is not a field of ``core.AgentOptions`` (a misspelt one)."""
    fields = [f.name for f in dataclasses.fields(AgentOptions)]
    for name in options:
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"build_agent() got an unknown option {name!r}{hint}: its options are the fields of core.AgentOptions"
            )


def build_agent(
    settings: Settings,
    *,
    bot: Bot | None = None,
    dispatcher: Dispatcher | None = None,
    listen: bool = True,
    model: Model | None = None,
    memory: MemoryStore | None = None,
    usage: UsageStore | None = None,
    platforms: list[str] | None = None,
    tools: bool = True,
    history: HistoryStore | None = None,
    summary_lock: SummaryLock | None = None,
    limit_store: LimitStore | None = None,
    web_fleet: dict[str, Any] | None = None,
    schedules: ScheduleStore | None = None,
    fire_schedules: bool = True,
    schedules_clock: Clock | None = None,
    approvals: ApprovalStore | None = None,
    sweep_approvals: bool = True,
    **options: Unpack[AgentOptionFields],
) -> Agent:
    """The agent of ``bot`` (default: the built-in assistant, ``bots.assistant.assistant``) on the platforms of the
    settings. Raises ``ConfigError`` listing every problem in the settings. ``tools=False`` leaves the MCP servers
    out (a gateway only stores inputs). Without ``memory`` (embedded) and without ``history``, the history is kept
    in SQLite next to the memory store. ``limit_store`` holds the message counts of the limits
    (``BOT_MESSAGES_PER_MINUTE``; default: this process's memory); the per-day token limits read ``usage``.
    ``web_fleet``: the web chat's ``gateway_id`` and ``relay`` in a fleet (``bots.console.roles``). ``schedules``:
    where reminders and scheduled messages live (default: the memory store, one process; a fleet passes
    ``RedisScheduleStore``, without which a queued agent has none); ``fire_schedules``: this process fires the due
    ones (a gateway does not); ``schedules_clock``: what time it is for them (a test's ``ManualClock``).
    ``approvals``: where calls waiting for an approval live (default: the memory store, one process; a fleet passes
    ``RedisApprovalStore``, without which a queued agent refuses such calls); ``sweep_approvals``: this process
    times requests out (a gateway does not). ``options``: fields of ``core.AgentOptions`` to set
    (``core.agent_options.AgentOptionFields``; a misspelt one is a ``TypeError`` naming it)."""
    _check_options(options)
    problems = check_settings(settings)
    if problems:
        raise ConfigError("invalid settings:\n  " + "\n  ".join(problems))
    if bot is None:
        bot = load_bot(settings.bot.app, settings)
    chosen_model = model if model is not None else build_model_from_settings(settings)
    if history is None and memory is None:
        history = build_history(settings)
    policy = build_summary_policy(settings)
    deployment = Deployment(
        settings=settings,
        dispatcher=dispatcher,
        usage=usage if usage is not None else (build_usage(settings) if memory is None else InMemoryUsage()),
        limit_store=limit_store,
        history=history,
        summary=policy,
        summary_lock=summary_lock,
        schedules=schedules,
        fire_schedules=fire_schedules,
        schedules_clock=schedules_clock,
        approvals=approvals,
        sweep_approvals=sweep_approvals,
        tools=tools,
        listen=listen,
    )
    agent_options = AgentOptions(
        persona=persona_text(settings.bot.name, bot.persona) if bot.persona else "",
        max_tokens=settings.llm.max_tokens,
        max_batch=settings.redis.batch_size,
        busy=settings.bot.busy,
        quiet_ms=settings.bot.quiet_ms,
        quiet_ms_by_context={c: p.quiet_ms for p in all_platforms() if p.quiet_ms is not None for c in p.contexts},
        # a chain of models (LLM_FALLBACKS) may wait LLM_TIMEOUT for each one's first chunk
        model_idle_timeout=settings.llm.timeout * (1 + len(settings.llm.fallbacks)),
        compact_prompt=(
            settings.llm.provider == "local" if settings.llm.compact_prompt is None else settings.llm.compact_prompt
        ),
        chat_policy=build_chat_policy(settings),
    )
    agent_options = dataclasses.replace(agent_options, **options)
    try:
        agent = create_agent(
            model=chosen_model,
            bot=dataclasses.replace(bot, plugins=resolve(safe_plugins(bot), deployment)),
            extensions=build_extensions(settings, listen=listen, only=platforms, web_fleet=web_fleet),
            memory=memory if memory is not None else build_memory(settings),
            dispatcher=dispatcher,
            options=agent_options,
        )
    except DefinitionError as exc:  # a mistake in the bot's definitions: where the bot is built says which
        raise ConfigError(f"{bot.defined_at}: DefinitionError: {exc}") from exc
    agent.add_service(
        service(
            name="model",
            start=lambda _host: open_model(chosen_model, agent),  # (the agent built here: its prompt form)
            stop=lambda _agent: close_model(chosen_model),
        )
    )
    summary_model = policy.model
    if summary_model is not None:
        agent.add_service(service(name="summary-model", stop=lambda _agent: close_model(summary_model)))
    opener = getattr(history, "start", None)
    if opener is not None:  # PostgreSQL: migrations at start (a database down is reported, not fatal)
        agent.add_service(service(name="history", start=lambda _agent: _open_history(opener)))
    if history is not None and settings.bot.history_retention_days > 0:
        sweeper = RetentionSweeper(history, days=settings.bot.history_retention_days)
        agent.add_service(service(name="history-retention", start=sweeper.start, stop=sweeper.stop))
    set_up(bot.plugins, agent, deployment)
    for ctx in agent.contexts.values():
        ctx.max_steps = settings.bot.max_steps
        # the window is all working memory keeps: what leaves it lives in the history store (searchable, summarized);
        # keeping more would only make every load and save of a conversation cost more as it grows
        ctx.max_working_memory = ctx.keep_logs = min(settings.bot.history, ctx.keep_logs)
    return agent
