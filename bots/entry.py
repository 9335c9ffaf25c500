"""The ``bots`` console script: ``bots --version`` answers from the package metadata alone, without importing the
framework (a few milliseconds instead of a second); every other command is ``bots.cli.main``."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

__all__ = ("leaving", "main")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bots`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from .version import version

        print(f"bots {version()}")
        return 0
    from .cli import main as cli_main

    code = cli_main(args)
    if argv is None:  # the console script itself, about to exit (a caller passing argv keeps its collector)
        leaving()
    return code


def leaving() -> None:
    """Spare the interpreter's last garbage collections before the process exits: they walk every object of the
    framework and its libraries (about 0.25 s of CPU for a ``bots worker``, a quarter of what it spends to start),
    only to free memory the system takes back anyway. ``gc.freeze`` moves what lives now out of the collector's
    sight; the exit itself is unchanged (``atexit`` handlers, threads joined, modules torn down, files closed)."""
    gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
