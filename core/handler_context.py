"""What handlers and hooks receive: the state of a context instance (``ContextState``) and, with it, what an
action, output or input handler is given (``ActionContext``, ``OutputContext``, ``InputContext``). They live in
``core.definition_types``, beside the definitions and the ``Host`` they name."""

from __future__ import annotations

from .definition_types import ActionContext, ArgsT, AttrsT, ContextState, InputContext, OutputContext

__all__ = ("ActionContext", "ArgsT", "AttrsT", "ContextState", "InputContext", "OutputContext")
