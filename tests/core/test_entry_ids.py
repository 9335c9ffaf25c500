"""Entry ids (``core.entries.new_id``) stay unique across processes, a forked child included: a worker forked from
a parent that had imported ``core`` (a pre-forking server, the suite's fork server) makes ids of its own, not the
same ones as its parent and its siblings."""

from __future__ import annotations

import os

from core.entries import new_id


def test_a_forked_child_makes_ids_of_its_own() -> None:
    new_id()  # the parent has made ids before it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out at once
        try:
            os.write(write, new_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read().decode()
    os.waitpid(pid, 0)
    ours = new_id()
    # (the counter after the prefix is the process's own: the parent's has made many ids in a whole run)
    assert theirs[:8] != ours[:8], (theirs, ours)
