"""The worker's side of a message's trace: the time each input waited in its inbox, and the run of the batch,
continuing the trace the gateway stored with the input (``"tp"``, a W3C ``traceparent``). A batch run again
after a crash or a takeover carries the same entries, so its run continues the same trace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import tracing

if TYPE_CHECKING:
    from .scope import RunScope

__all__ = ("batch_span",)


def batch_span(entries: list[dict[str, Any]], scope: RunScope) -> Any:
    """A context manager around the run of one batch (``tracing.NO_SPAN`` while tracing is off)."""
    if not tracing.active():
        return tracing.NO_SPAN
    return _batch_span(entries, scope)


@contextlib.contextmanager
def _batch_span(entries: list[dict[str, Any]], scope: RunScope) -> Iterator[tracing.SpanLike]:
    parents = [tracing.parent_from(entry.get("tp")) for entry in entries]
    for entry, parent in zip(entries, parents, strict=True):
        stored = entry.get("t")
        if parent is None or not isinstance(stored, int | float):
            continue
        wait = tracing.start("inbox wait", kind="consumer", parent=parent, start_time=stored)
        wait.set_attributes({"messaging.system": "redis", "bots.batch.attempt": scope.attempt})
        wait.end()
    found = [parent for parent in parents if parent is not None]
    with tracing.span("run batch", kind="consumer", parent=found[-1] if found else None, links=found[:-1]) as span:
        span.set_attributes(
            {
                "messaging.system": "redis",
                "messaging.operation.type": "process",
                "messaging.batch.message_count": len(entries),
                "bots.context.id": tracing.ident(scope.keys.cid),
                "bots.batch.id": scope.batch_id,
                "bots.batch.attempt": scope.attempt,
                "bots.worker": scope.lease.owner,
            }
        )
        yield span
