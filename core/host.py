"""What the agent offers the code it hosts, as protocols: core depends on these, never on ``core.agent``.

- ``Host`` is the agent as a handler, a context hook, an extension or a service sees it (``core.definition_types``,
  beside the definitions that name it).
- ``Runner`` is the agent as a dispatcher or a queue worker sees it: something that runs contexts
  (``core.dispatch``, beside the dispatchers).

``core.Agent`` satisfies both; a test may hand either one a small stand-in.
"""

from __future__ import annotations

from .definition_types import Check, Host, Observer
from .dispatch import Runner

__all__ = ("Check", "Host", "Observer", "Runner")
