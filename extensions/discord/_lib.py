"""discord.py, imported once without its import-time noise (it imports ``audioop``, deprecated in 3.11)."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*audioop.*", category=DeprecationWarning)
    import discord
    import discord.gateway
    import discord.http
    from discord import app_commands

__all__ = ("app_commands", "discord")
