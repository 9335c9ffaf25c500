"""The platform registry: a platform is a package that declares itself with one ``Platform`` object, found through
the ``daydreams_bots.platforms`` entry point group (``pyproject.toml``), so that another installed package can add
one. The program (``bots``), the gateway, the config command, trust, schedules and the fleet ask the registry and
name no platform.

A platform package declares, in a module that imports none of its SDK (``extensions.telegram.platform``)::

    PLATFORM = Platform(name="telegram", title="Telegram", settings_group="telegram", ..., build=_build)

and in its ``pyproject.toml``::

    [project.entry-points."daydreams_bots.platforms"]
    telegram = "extensions.telegram.platform:PLATFORM"

Listing the names reads the installed packages' metadata only; a platform's module is imported when it is asked
for by name (``platform("telegram")``) or when all of them are (``all_platforms()``), and its SDK only when its
extension is built (``Platform.build``).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from core.errors import ConfigError

if TYPE_CHECKING:
    import asyncio

    from core.definitions import Extension
    from core.fleet import RedisBackend
    from core.host import Host, Setup

    from .chat.trust import TrustRules

__all__ = (
    "ENTRY_POINT_GROUP",
    "Build",
    "GatewayPeriod",
    "Platform",
    "all_platforms",
    "operator_channel",
    "ordered_dedupe",
    "platform",
    "platform_names",
)

ENTRY_POINT_GROUP = "daydreams_bots.platforms"
"""The entry point group a platform package registers its ``Platform`` in."""

Ingest = Literal["none", "shared", "single", "shards"]
"""How the gateways of a fleet divide a platform's ingest: ``shared`` (every gateway takes it: webhooks, the web
chat), ``single`` (one gateway at a time, the others stand by on a lease: Telegram long polling), ``shards``
(the platform's shards divided by leases: Discord), ``none`` (no gateway: the terminal)."""


@dataclass(frozen=True, kw_only=True)
class Build:
    """What building a platform's extension takes besides its settings group."""

    settings: Any
    """The platform's settings group (``Settings.<settings_group>``; None for a platform without one)."""
    listen: bool = True
    """Take messages (False: a fleet's worker, which only posts)."""
    trust: TrustRules | None = None
    """How authors get their tier and which bots are answered (``TRUST_*``, ``BOT_ADMIN_USERS``)."""
    data_dir: Path = Path("data")
    """``BOT_DATA_DIR``: where the platform keeps its files (media, secrets)."""
    title: str = ""
    """The bot's name (``BOT_NAME``), for pages that show one."""
    fleet: Mapping[str, Any] = field(default_factory=dict)
    """The fleet's options, each platform taking those it uses: ``answers`` (``core.fleet.RedisAnswerBook``, the
    bot's answers for reactions as feedback: Telegram), ``ephemeral`` (``core.fleet.RedisEphemeral``: the queue's keys
    of a conversation kept by nothing expire: Telegram's guest requests), the web chat's ``gateway_id``, ``relay`` and
    ``visitors``."""


@dataclass(frozen=True, kw_only=True)
class GatewayPeriod:
    """What a platform's ``gateway`` hook is given for one listening period of a fleet's gateway (``bots gateway``)."""

    settings: Any
    """The platform's settings group."""
    backend: RedisBackend
    """The fleet's Redis, for leases of its own."""
    lease_name: str
    """``<name>:<hash of its token>``: the prefix of the leases it takes (never the token itself)."""
    ttl: float
    """Seconds a dead gateway's lease lasts (``REDIS_LEASE_SECONDS``, at least ``MIN_LOCK_TTL``)."""
    stopping: asyncio.Event
    """Set when the gateway stops."""
    observe: Callable[[str, Callable[[], dict[str, Any]]], Callable[[], None]]
    """Show ``info()`` under a name on ``/healthz`` and the console (sampled for the metrics); returns its remover."""
    shards: Callable[[int, list[int]], None]
    """Set the shards metrics: how many there are, which this gateway holds."""


Gateway = Callable[["Setup", GatewayPeriod], AbstractAsyncContextManager[None]]
"""A fleet gateway's part of a platform (``Platform.gateway``): called before the platform's agent starts (it may
add services), what it returns is entered once the agent started and exited before it stops."""


@dataclass(frozen=True, kw_only=True)
class Platform:
    """One chat platform, as its package declares it."""

    name: str
    """Its name, the prefix of its ids and its contexts' types: ``telegram``."""
    title: str
    """Its name for people: ``Telegram``."""
    build: Callable[[Build], Extension]
    """Its extension (context, input, outputs, runtime as a service); imports its SDK."""
    settings_group: str | None = None
    """Its group of ``bots.Settings`` (``telegram``: the variables ``TELEGRAM_*``); None: it has no settings."""
    settings_class: type[Any] | None = None
    """Its settings, a pydantic model, given with ``settings_group``: ``bots.Settings`` gets a field
    ``<settings_group>`` of this class, so its fields are read as ``<GROUP>_<FIELD>`` from the environment and
    ``.env``, shown by ``bots config`` and the settings reference, and checked like the others."""
    contexts: tuple[str, ...] = ()
    """The types of the contexts it brings: ``("telegram:chat",)``."""
    configured: Callable[[Any], bool] = field(default=lambda group: False)
    """The settings group asks for it (a token set), so ``bots run`` and ``bots gateway`` serve it."""
    extra: str = ""
    """The module its optional extra brings (``telegram``): a missing one is reported by ``bots config``."""
    token_setting: str = ""
    """The variable that turns it on (``TELEGRAM_TOKEN``), for messages."""
    ingest: Callable[[Any], Ingest] = field(default=lambda group: "shared")
    """How the gateways of a fleet divide its ingest, by its settings group (``Ingest``)."""
    listening: Callable[[Any], str] = field(default=lambda group: "")
    """What a gateway listens to on it, by its settings group, for the gateway's log: ``webhook on 0.0.0.0:8443``."""
    scaling: Callable[[Any, float], str] | None = None
    """How it spreads over ``bots gateway`` processes, for ``bots config``, by its settings group and
    ``REDIS_LEASE_SECONDS``; None: nothing to say."""
    quiet_ms: int | None = None
    """The quiet window of its conversations instead of ``BOT_QUIET_MS`` (the terminal: 0, a person at a terminal
    sends one line and waits for its answer); None: the operator's."""
    admin_ids: bool = False
    """Its user ids (``telegram:123``) may be named in ``BOT_ADMIN_USERS`` (a platform whose ids anyone can make,
    like the web chat's visitors, must not)."""
    bot_ids: bool = False
    """Other bots on it may be named in ``TRUST_BOTS`` (``telegram:@name``, ``telegram:123``, ``telegram:*``)."""
    id_example: str = ""
    """A user id as an operator writes it, for messages: ``telegram:123``."""
    channel: Callable[[str], tuple[str, dict[str, Any]] | None] | None = None
    """An operator's channel on it (``BOT_SCHEDULES``, approval chats) from what follows ``<name>:``: the context
    type and its arguments, None if it is not one of its forms. None: it has no operator channels."""
    channel_forms: str = ""
    """The forms of ``channel`` in words: ``telegram:<chat id> (telegram:<chat id>:<topic id> for a forum topic)``."""
    warnings: Callable[[Any], list[str]] = field(default=lambda group: [])
    """Weak but working settings, by its settings group, for ``bots config``'s warnings (a webhook over http://)."""
    gateway: Gateway | None = None
    """What a fleet's gateway adds to its agent for a listening period (Discord: the shards divided by leases);
    None: nothing."""
    message_link: Callable[[Any, str], str | None] | None = None
    """The address of a message by its id in a conversation of these context arguments (``/catchup`` links to the
    messages it cites: a Telegram supergroup's ``t.me/c/...``, a Discord channel's ``discord.com/channels/...``),
    None where there is none; None: the platform has no message links."""
    private_chat: Callable[[Host, str], Awaitable[tuple[str, dict[str, Any]] | None]] | None = None
    """The context type and arguments of a person's private chat with the bot, by their user id (``/catchup
    private``), None when they have none; None: the platform has no private chats."""
    ordered_dedupe: bool = False
    """Its dedupe keys ``<name>:<number>`` grow per conversation, so the fleet keeps a high-water mark (a
    Telegram update id, a Discord snowflake); otherwise they are remembered in the dedupe window only."""


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def platform_names() -> list[str]:
    """The registered platforms' names, sorted (nothing of them is imported)."""
    return sorted(_entry_points())


@functools.cache
def platform(name: str) -> Platform:
    """The platform registered as ``name``; ``ConfigError`` naming the registered ones otherwise."""
    ep = _entry_points().get(name)
    if ep is None:
        known = ", ".join(platform_names()) or "none"
        raise ConfigError(f"unknown platform {name!r}: use one of {known} (entry points {ENTRY_POINT_GROUP!r})")
    found = ep.load()
    if not isinstance(found, Platform) or found.name != name:
        raise ConfigError(
            f"entry point {name!r} of {ENTRY_POINT_GROUP!r} ({ep.value}) is not a Platform named {name!r}"
        )
    return found


def all_platforms() -> list[Platform]:
    """Every registered platform, by name (this imports their declaring modules, not their SDKs)."""
    return [platform(name) for name in platform_names()]


def ordered_dedupe() -> tuple[str, ...]:
    """The dedupe key prefixes (``telegram:``) whose numbers grow per conversation (``Platform.ordered_dedupe``)."""
    return tuple(f"{p.name}:" for p in all_platforms() if p.ordered_dedupe)


def operator_channel(channel: str) -> tuple[str, dict[str, Any]]:
    """The context type and arguments of an operator's channel (``telegram:-100123``); ``ValueError`` saying the
    registered platforms' forms otherwise."""
    name, _, rest = channel.strip().partition(":")
    if name in _entry_points():
        found = platform(name)
        address = found.channel(rest) if found.channel is not None else None
        if address is not None:
            return address
    forms = " or ".join(p.channel_forms for p in all_platforms() if p.channel is not None and p.channel_forms)
    raise ValueError(f"channel {channel!r} is not one: write {forms}")
