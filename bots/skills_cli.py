"""``bots skills``: install, list and remove skills (``extensions.skills``) under ``SKILLS_DIR``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("HELP", "add_arguments", "command")

HELP = "install (add PATH|URL), list or remove the skills the bot offers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``bots skills``."""
    sub = parser.add_subparsers(dest="skills_command", required=True)
    add = sub.add_parser("add", help="install a skill folder, or a .zip/.tar.gz archive (a file or an http(s) URL)")
    add.add_argument("source", metavar="PATH|URL")
    add.add_argument(
        "--sha256", help="the archive's (or the folder's files') expected SHA-256: nothing is installed when it differs"
    )
    sub.add_parser("list", help="the installed skills, their scripts and pinned hashes")
    remove = sub.add_parser("remove", help="uninstall a skill")
    remove.add_argument("name")


def command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``bots skills``; the exit code."""
    from extensions.skills import SkillError, add_skill, installed_skills, remove_skill  # (only for this command)
    from extensions.skills.skill import read_lock

    root = settings.skills.root(settings.bot.data_dir)
    try:
        if args.skills_command == "add":
            done = add_skill(args.source, root, sha256=args.sha256)
            verb = "replaced" if done.replaced else "installed"
            print(f"{verb} skill {done.name} in {root / done.name} (sha256 {done.sha256}); restart the bot to offer it")
            return 0
        if args.skills_command == "remove":
            if not remove_skill(args.name, root):
                print(f"bots: no skill {args.name!r} is installed in {root}", file=sys.stderr)
                return 1
            print(f"removed skill {args.name}; restart the bot to stop offering it")
            return 0
        pins = read_lock(root)
        usable = {s.name: s for s in installed_skills(root)}
        if not pins:
            print(f"no skill installed in {root} (bots skills add PATH|URL)")
        for name, pin in sorted(pins.items()):
            skill = usable.get(name)
            state = "ok" if skill is not None else "NOT LOADED (see the warning above)"
            print(f"{name}  {state}  sha256 {pin.get('sha256', '?')[:16]}  from {pin.get('source', '?')}")
            if skill is not None:
                print(f"    {skill.description}")
                for script in skill.scripts:
                    print(f"    script skill:{name}:{script}")
        return 0
    except SkillError as exc:
        print(f"bots: {exc}", file=sys.stderr)
        return 2
