"""What the agent offers the code it hosts, as protocols: core depends on these, never on ``core.agent``.

- ``Host`` is the agent as a handler or a context hook sees it, ``Setup`` as an extension's ``install``, a plugin's
  ``attach`` or a service sees it (``core.definition_types``, beside the definitions that name them).
- ``Runner`` is the agent as a dispatcher or a queue worker sees it: something that runs contexts
  (``core.dispatch``, beside the dispatchers).

``core.Agent`` satisfies them all; a test may hand either one a small stand-in.
"""

from __future__ import annotations

from .definition_types import Check, Host, Observer, Setup
from .dispatch import Runner

__all__ = ("Check", "Host", "Observer", "Runner", "Setup")
