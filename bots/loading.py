"""Loading a bot: ``bots run APP`` (and ``chat``, ``gateway``, ``worker``; ``BOT_APP`` sets the same).

APP names a bot the way ``uvicorn module:app`` names an application: a ``.py`` file (``mybot.py``), a folder
holding ``bot.py`` (``mybot``), or a module (``mypackage.mybot``), each optionally followed by ``:attribute``.
Without one, the module's ``bot`` is used. It is a ``core.Bot``, or a factory that builds one from the settings
(``def bot(settings) -> Bot``). The built-in assistant is the default APP, loaded the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from core import Bot
from core.errors import ConfigError

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("DEFAULT_APP", "load_bot")

DEFAULT_APP = "bots.assistant:assistant"
"""The built-in assistant."""


def load_bot(app: str, settings: Settings) -> Bot:
    """The bot ``app`` names (empty: the built-in assistant), built from ``settings`` when it is a factory.
    Raises ``ConfigError`` naming the file and line of a mistake in the bot's module."""
    app = app.strip() or DEFAULT_APP
    where, _, attribute = _split(app)
    module = _import(app, where)
    name = attribute or "bot"
    if not hasattr(module, name):
        found = [n for n, v in vars(module).items() if isinstance(v, Bot)]
        hint = f" (it has {', '.join(found)}: name it with APP={where}:{found[0]})" if found else ""
        raise ConfigError(
            f"APP {app!r}: {_origin(module)} defines no {name!r}{hint}; define `{name} = Bot(...)` or "
            f"`def {name}(settings) -> Bot`, or name another attribute with {where}:NAME"
        )
    value = getattr(module, name)
    if isinstance(value, Bot):
        return value
    if not callable(value):
        raise ConfigError(
            f"APP {app!r}: {name} is a {type(value).__name__}, not a core.Bot nor a factory `def {name}(settings)`"
        )
    try:
        built = value(settings) if _takes_an_argument(value) else value()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"APP {app!r}: {name}(settings) raised {_located(exc, module)}") from exc
    if not isinstance(built, Bot):
        raise ConfigError(f"APP {app!r}: {name}(settings) returned a {type(built).__name__}, not a core.Bot")
    return built


def _split(app: str) -> tuple[str, str, str]:
    where, sep, attribute = app.rpartition(":")
    if not sep or not attribute.isidentifier() or len(where) < 1 or (len(where) == 1 and where.isalpha()):
        return app, "", ""  # no attribute (or a Windows drive letter)
    return where, sep, attribute


def _import(app: str, where: str) -> ModuleType:
    path = Path(where)
    if path.is_dir():
        path = path / "bot.py"
        if not path.is_file():
            raise ConfigError(f"APP {app!r}: the folder {where} has no bot.py")
    if path.suffix == ".py" or path.is_file():
        if not path.is_file():
            raise ConfigError(f"APP {app!r}: no file {path}")
        return _import_file(app, path.resolve())
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        if exc.name is not None and where.startswith(exc.name):
            raise ConfigError(
                f"APP {app!r}: no module {where!r} and no file or folder of that name; give a path to a .py file, "
                "a folder holding bot.py, or an importable module"
            ) from None
        raise ConfigError(f"APP {app!r}: importing {where} failed: {_located(exc, None)}") from exc
    except Exception as exc:
        raise ConfigError(f"APP {app!r}: importing {where} failed: {_located(exc, None)}") from exc


def _import_file(app: str, path: Path) -> ModuleType:
    """Import ``path`` as a module named after it, its folder first on ``sys.path`` (as ``python path`` does), so
    the bot's own modules beside it import."""
    name = path.stem if path.stem.isidentifier() else "bot_app"
    known = sys.modules.get(name)
    if known is not None and getattr(known, "__file__", None) == str(path):
        return known
    if known is not None:
        name = f"_bots_app_{abs(hash(str(path)))}"
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"APP {app!r}: {path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: its pydantic models and dataclasses look themselves up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"APP {app!r}: {_located(exc, path)}") from exc
    return module


def _located(exc: BaseException, where: ModuleType | Path | None) -> str:
    """``file:line: Error: message`` at the deepest frame in the bot's file (or the last frame outside this
    package), so the author reads where their mistake is."""
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    file = str(where) if isinstance(where, Path) else getattr(where, "__file__", None)
    frames = traceback.extract_tb(exc.__traceback__)
    chosen = None
    for frame in frames:
        if file is not None and frame.filename == file:
            chosen = frame
    if chosen is None:
        outside = [f for f in frames if "importlib" not in f.filename and not f.filename.endswith("loading.py")]
        chosen = outside[-1] if outside else None
    return f"{chosen.filename}:{chosen.lineno}: {what}" if chosen is not None else what


def _origin(module: ModuleType) -> str:
    return getattr(module, "__file__", None) or module.__name__


def _takes_an_argument(factory: Any) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return bool(positional)
