"""Variables that look like settings but are not: ``TELEGRAM_BOT_TOKEN`` set where ``TELEGRAM_TOKEN`` is meant.

``Settings`` ignores what it does not know (``extra="ignore"``), so a misspelt variable is silently a default.
``unknown_variables_warnings`` finds every variable, in the environment or in ``.env``, that starts with one of
the settings' prefixes (``LLM_``, ``TELEGRAM_``...) and that no setting reads, and says which real variable is
closest; a variable whose prefix itself is misspelt (``TELEGRM_TOKEN``, ``LOGLEVEL``) is named too when it is very
close to a real one (``TYPO_CUTOFF``: other programs' variables stay quiet). Only names are ever shown: a value
may be a secret.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from .docs import settings_variables
from .settings import Settings

__all__ = ("ENV_FILE", "TYPO_CUTOFF", "unknown_variables_warnings")

_env_file = Settings.model_config.get("env_file")
ENV_FILE: Path | None = Path(_env_file) if isinstance(_env_file, str | Path) else None
"""The file ``Settings`` reads besides the environment (``.env``, in the working folder)."""

_MCP_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``${NAME}`` in ``MCP_SERVERS``: a variable the MCP servers' settings read (``extensions/mcp/settings.py``)."""
TYPO_CUTOFF = 0.85
"""How close (difflib's ratio) a variable without a settings prefix must be to a real one to be taken as its typo."""
_READ_BY_OTHERS = frozenset({"HTTP_PROXY", "WEB_CONCURRENCY"})
"""Variables of other programs that share a prefix: the HTTP clients' proxy, a platform's worker count."""
_SERVICE_LINK = re.compile(r"\w+_(SERVICE_(HOST|PORT)(_\w+)?|PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)")
"""What Kubernetes sets for every Service of the namespace (``redis`` gives ``REDIS_SERVICE_HOST``...)."""
_SERVICE_LINK_PORT = re.compile(r"(tcp|udp|sctp)://\S+")
"""The value of its ``<SERVICE>_PORT`` (``REDIS_PORT=tcp://10.0.0.7:6379``)."""


def unknown_variables_warnings(environ: Mapping[str, str], *, env_file: Path | None = ENV_FILE) -> list[str]:
    """One line per variable of ``environ`` or ``env_file`` (when it exists) that has a settings prefix but that
    no setting reads, naming the closest real variable; ``bots config`` prints them and start-up logs them.
    Values are never shown (a value may be a secret)."""
    known = set(settings_variables())
    groups = {name.upper() for name in Settings.model_fields}  # LLM='{"model": ...}' sets a whole group
    from_file = _names_in(env_file)
    referenced = _mcp_references(environ.get("MCP_SERVERS") or from_file.get("MCP_SERVERS"))
    in_environ = {name.upper() for name in environ}
    found: list[tuple[str, str | None, str]] = [(n, v, "the environment") for n, v in environ.items()]
    found += [(n, v, str(env_file)) for n, v in from_file.items() if n.upper() not in in_environ]  # environ wins
    lines = []
    for name, value, where in found:
        upper = name.upper()  # pydantic-settings matches names whatever their case
        if upper.split("_", 1)[0] not in groups:
            close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=TYPO_CUTOFF)
            if close and name not in referenced:
                lines.append(
                    f"{name} (in {where}) is not a setting: did you mean {close[0]}? (a misspelt variable leaves its "
                    "setting at the default)"
                )
            continue
        if upper in known or upper in groups or name in referenced:
            continue
        if _read_by_others(upper, value):
            continue
        lines.append(f"{name} (in {where}) is not a setting: {_suggestion(upper, known)}")
    return lines


def _read_by_others(name: str, value: str | None) -> bool:
    if name in _READ_BY_OTHERS or _SERVICE_LINK.fullmatch(name):
        return True
    return name.endswith("_PORT") and _SERVICE_LINK_PORT.fullmatch(value or "") is not None


def _names_in(env_file: Path | None) -> dict[str, str | None]:
    if env_file is None or not env_file.is_file():
        return {}
    from dotenv import dotenv_values

    return dict(dotenv_values(env_file))


def _mcp_references(servers: str | None) -> set[str]:
    """The ``${NAME}`` in ``MCP_SERVERS``, or in the JSON file it names."""
    if not servers:
        return set()
    text = servers
    if not servers.lstrip().startswith(("[", "{")):
        try:
            text = Path(servers.strip()).expanduser().read_text(encoding="utf-8")
        except (OSError, ValueError):
            return set()
    return set(_MCP_REFERENCE.findall(text))


def _suggestion(name: str, known: Iterable[str]) -> str:
    prefix = name.split("_", 1)[0]
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}? (a misspelt variable leaves its setting at the default)"
    return f"no setting reads it; the {prefix}_* settings are listed by bots config and in .env.example"
