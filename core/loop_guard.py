"""The loop guard: what a run already did is not done again.

A model, small ones especially, may answer every step with the same call and the same reply. Within one run:

- a call of an action with the same arguments as a call of an earlier step that succeeded is refused back to
  the model as an error result (not run): its result is already in front of the model. Calls repeated within one
  response run (the model asked for several on purpose), and a call that failed may be tried again;
- an output with the same type and text as one already delivered is refused back to the model as an error (not
  delivered), and its text is not streamed to listeners while it may still turn out to be that repeat;
- a step that adds nothing new, every call and output of it refused as a repeat, ends the run (see
  ``Run.execute``).

So the user never gets the same reply twice for one message. A message that joins the run starts the guard
afresh: "hi" sent twice gets "Hello!" twice, and "what time is it?" asked again calls ``current_time`` again.
The guard keeps one key per successful call and the text of each delivered output: a few entries a run.

The guard is a plugin (``LoopGuard``), on the step loop's hooks like any feature, and a safety plugin: every bot
has it unless it goes without it by name (``Bot(without=["loop-guard"])``, ``core.safety``). What the engine keeps
of it is the rule that a step of nothing but refused repeats ends the run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .entries import InputRef
from .plugin import CallGate, OutputGate, Plugin, RunHooks, RunView

if TYPE_CHECKING:
    from .entries import ActionCall, Log

__all__ = ("LoopGuard", "Repeats")


def _arguments_key(content: str) -> str:
    """The arguments as written, with formatting that does not change them taken away (JSON key order and
    spacing)."""
    text = content.strip()
    if text[:1] in "{[":
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            pass
    return " ".join(text.split())


class LoopGuard(Plugin):
    """Refuses back to the model what its run already did (a call with the same arguments, the same reply)."""

    name = "loop-guard"

    def begin(self, run: RunView) -> Repeats:
        return Repeats(run)


class Repeats(RunHooks):
    """What one run has done: the calls that succeeded (by step) and the replies delivered (by output type)."""

    __slots__ = ("_calls", "_replies", "_run")

    def __init__(self, run: RunView | None = None) -> None:
        self._run = run
        self._calls: dict[tuple[str, str], int] = {}
        self._replies: dict[str, set[str]] = {}

    # -- the hooks ---------------------------------------------------------------------------------------------

    async def admit(self, updates: list[Log]) -> list[Log]:
        if self._calls or self._replies:  # (nothing done yet: nothing to forget; this runs at every step)
            for entry in updates:
                if isinstance(entry, InputRef):  # a message joined: the same answer is no repeat
                    self._calls.clear()
                    self._replies.clear()
                    break
        return updates

    def gate(self, gate: CallGate) -> None:
        if gate.action is not None and self.repeated_call(gate.name, gate.call.content, step=self._step):
            gate.refuse(
                f"{gate.name!r} was already called with these arguments in this run and its result is above, so it "
                "was not run again; use that result instead of calling it again",
                repeat=True,
            )

    def called(self, call: ActionCall) -> None:
        self.call_done(call.name, call.content, step=self._step)

    def holds(self, output_type: str, shown: str) -> bool:
        return self.could_repeat(output_type, shown)

    def vet(self, output: OutputGate) -> None:
        if self.repeated_reply(output.type, output.text):
            output.refuse(
                f"this {output.type!r} repeats one you already sent in this run word for word, so it was not sent "
                "again; do not repeat a reply: answer something new or end your response",
                repeat=True,
            )

    def delivered(self, output_type: str, text: str) -> None:
        self.replied(output_type, text)

    @property
    def _step(self) -> int:
        return self._run.steps if self._run is not None else 0

    # -- the record --------------------------------------------------------------------------------------------

    def repeated_call(self, name: str, content: str, *, step: int) -> bool:
        """True when a call of ``name`` with these arguments succeeded in an earlier step of the run."""
        if not self._calls:
            return False
        done = self._calls.get((name, _arguments_key(content)))
        return done is not None and done < step

    def call_done(self, name: str, content: str, *, step: int) -> None:
        """Note a call that succeeded (or was started without waiting for it) in ``step``."""
        self._calls.setdefault((name, _arguments_key(content)), step)

    def repeated_reply(self, output_type: str, text: str) -> bool:
        """True when an output of ``output_type`` with ``text`` was already delivered in the run."""
        replies = self._replies.get(output_type)
        return replies is not None and text.strip() in replies

    def could_repeat(self, output_type: str, shown: str) -> bool:
        """True while the text an output has streamed so far (``shown``) is the start of a reply already
        delivered: its deltas are held back until it differs (with nothing shown yet: some reply of that type was
        delivered)."""
        replies = self._replies.get(output_type)
        if not replies:
            return False
        start = shown.lstrip()
        return any(reply.startswith(start) for reply in replies)

    def replied(self, output_type: str, text: str) -> None:
        """Note a delivered output."""
        replies = self._replies.get(output_type)
        if replies is None:
            self._replies[output_type] = {text.strip()}
        else:
            replies.add(text.strip())
