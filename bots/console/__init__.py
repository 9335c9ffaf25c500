"""The operator console: pages behind a login (``CONSOLE_SECRET``), on their own port, loopback by default.

What it shows: the fleet (gateways and workers alive, queues, the dead-letter list), the conversations (search,
read, settings, forget, a live tail of their run events), the usage (tokens and cost per day, model, user and chat),
the effective settings (masked) and the readiness checks. ``bots.console.server.serve_console`` serves it; this
package's ``__init__`` imports only the settings, so ``bots.settings`` can read them without the pages.
"""

from .settings import DEFAULT_CONSOLE_PORT, ConsoleSettings

__all__ = ("DEFAULT_CONSOLE_PORT", "ConsoleSettings")
