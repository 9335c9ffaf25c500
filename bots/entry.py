"""The ``bots`` console script: ``bots --version`` answers from the package metadata alone, without importing the
framework (a few milliseconds instead of a second); every other command is ``bots.cli.main``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ("main",)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bots`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from .version import version

        print(f"bots {version()}")
        return 0
    from .cli import leaving
    from .cli import main as cli_main

    code = cli_main(args)
    if argv is None:  # the console script itself, about to exit (a caller passing argv keeps its collector)
        leaving()
    return code


if __name__ == "__main__":
    sys.exit(main())
