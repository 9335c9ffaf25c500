"""A code sandbox: the ``run_code`` action runs a short program under bubblewrap, without network, files of the bot or
more than its limits (``core.sandbox.runner``), for the trust tiers the operator names (``core.sandbox.plugin``)."""

from .plugin import RUN_CODE, CodeSandbox, RunCodeArgs
from .runner import Language, Sandbox, SandboxLimits, SandboxResult, find_sandbox

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "CodeSandbox",
    "Language",
    "RUN_CODE",
    "RunCodeArgs",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "find_sandbox",
)
