"""The embedded model: a GGUF file run in this process by llama.cpp through ``xllamacpp``.

The weights are a choice of ``weights.py`` (Qwen2.5 Coder 0.5B Instruct by default, assembled once from its
packages and checked before every load) or any GGUF file. The model is loaded once, lazily or by ``load()``,
under a lock, in a thread, reporting its progress. Each answer is generated in a worker thread by llama.cpp's
own server code (chat template of the model, sampling, a GBNF grammar, see ``grammar.py``); chunks cross to
the event loop through a queue, and a cancelled stream stops the generation at the next token.

**A warm cache.** llama.cpp runs ``slots`` sequences side by side, each with its own KV cache of
``context_size`` tokens. Each conversation (the request's ``context_id``) keeps one slot while it is among the
``slots`` most recently active, so its next turn only evaluates what is new: the prompt prefix already in the
slot is kept (``cache_prompt``), and when the window of messages slides, the chunks that moved are shifted
rather than evaluated again (``n_cache_reuse``). Conversations never share a slot at the same time; one that
lost its slot starts from the common prefix of the one it takes over (the system prompt). Whatever belongs to
no conversation (a summary, writing a tool call) uses a scratch slot, so it never evicts one. Warming evaluates the
first conversation's prompts once and copies them into every other slot of their kind (``warm``); what it evaluated
is kept on disk beside the weights (``slot_cache``), so the next start of the same bot restores it instead.

**Several people at once.** llama.cpp decodes the tokens of every busy slot in one batch (continuous batching),
so conversations are answered side by side, not one after another. Nothing here makes one wait for another:
each answer has a thread of the model's own waiting on llama.cpp, and what belongs to no conversation has
``helpers`` slots of each kind (scratch, deciding), taken by whichever request needs one, so that several
people's decisions and tool calls run together too (two requests given one slot would run one after the other).

**Tools.** A model whose chat template has the Hermes tool-call format (Qwen2.5) declares ``calls_tools``. For a
plain request with ``tools`` it first decides, in a short prompt of its own with examples and a grammar that only
allows a tool's name or ``none``, whether the user's last message needs a tool: a model this small, shown tools
while it answers, calls one for almost every message. ``none`` gets the plain reply, without tools. An output the
decision names is asked about once more, alone (does the message ask for it? ``yes`` or ``no``), as the decision
names one for any message with its words; declined (or a yes less than twice as likely as a no), it is the plain
reply. ``none`` for a bot's own tools is asked about once more when the message shares words with an action (for
the built-in assistant's, when a request says a tool's name): that action alone, yes or no (``_second_look``); a yes
gets its call, kept only if each argument is in the person's lines (``stated``). A tool gets its call: the
conversation with that tool listed by the chat template and a grammar that only lets the model write
``<tool_call>{json}</tool_call>`` with arguments of the tool's schema (an identifier, ``id`` or ``..._id``, among the
whole numbers the conversation shows: ``narrowed``), a clause of a text argument copied from the tool's description
cut (``unborrowed``); the call is handed to the step
loop as ``<response><action_call name="...">{json}</action_call></response>``; for a tool that takes a date, the
days the message names are dated under it from the today the system prompt states (``day_table``). The result comes
back as a note on the user's message, and the next step (its last turn a result, not the user's) is a plain reply:
the model answers once instead of calling tools forever. Deciding and calling use slots of their own, so the
conversation's slot only ever holds its plain prompt and stays warm.

A first call that fails (its arguments do not validate, the handler raises) is made once more with the error in
view: another action if one shares more words with the person's lines and the decision, asked again among those,
names it (``convert`` chosen for money beside ``exchange``), else the same one with its arguments written again; a
second failure is answered (with the handler's reason when the model's answer does not say it, or tells it as an
onlooker: ``_answer_after_failure``). The answer after a successful tool is checked whole (``answer_guards``): one
that refuses or shows nothing the result adds to the message is written once more without sampling, and if that one
does not show it either, the result is the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import urllib.request
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelError
from .answer_guards import (
    IdentityGuard,
    about_itself,
    claimed,
    copies_kept,
    failure_answer,
    failure_reason,
    fallback_answer,
    in_results_words,
    is_refusal,
    labelled,
    narrates,
    result_note,
    sentences,
    shows_result,
    spoken,
    unclaimed,
    unlabelled,
    unnoted,
)
from .auto import usable_cores
from .base import ModelRequest, ModelUsage, ToolSpec
from .day_table import day_note, takes_date, today_in
from .gguf import calls_tools, check_gguf, gguf_chat_template
from .grammar import (
    TOOL_CALL_OPEN,
    GrammarLimits,
    ToolCall,
    grammar_for,
    parse_tool_call,
    takes_arguments,
    tool_call_grammar,
    tool_call_start,
    whole_call,
)
from .llama_server import import_xllamacpp, server_params
from .slot_cache import FOLDER as SLOT_FOLDER
from .slot_cache import Identity, SlotCache, writable_folder
from .tool_routing import (
    CONFIRM_DEMOS,
    CONFIRM_TASK,
    ROUTE_DEMOS,
    ROUTE_EXAMPLES,
    ROUTE_TASK,
    closest_action,
    confirm_question,
    described,
    grounded,
    named,
    narrowed,
    offered_again,
    overlap,
    remark,
    repeated,
    route_question,
    signature,
    stated,
    unborrowed,
    without_unstated,
)
from .weights import (
    CHOICES,
    DEFAULT_CHOICE,
    DEFAULT_WEIGHTS_DIR,
    Weights,
    default_model_path,
    find_parts,
    missing,
    prepare,
    user_cache_dir,
)

__all__ = ("LocalModel", "calls_tools", "check_gguf", "default_model_path")

log = logging.getLogger(__name__)

_CALL_LIMITS = GrammarLimits(string_chars=160, json_members=8)
"""Bounds of a tool call's arguments: within ``_CALL_TOKENS`` even at one character a token."""
_CALL_TOKENS = 1024
_EARLIER_CHARS = 200
"""Characters of the person's line before the message shown to decide on a tool at most."""
_CONFIRM_ODDS = 2.0
"""How many times as likely as a no the second question's yes must be for an output to be shown (``_confirmed``)."""
_NOTHING_DONE = "OK."
"""The answer to a message when every sentence the model wrote for it claims an action nobody called."""
_REMARK_ODDS = 3.0
"""How many times as likely as a no the second question's yes must be for an action the decision named for a remark
(``remark``) to be called. Asked of ``bench/tools.py``'s bots: the remarks before a request ("The tea needs 4
minutes." -> ``set_timer``, "I have 200 euros left." -> ``compute``) 0.8 to 2.5, the expenses said as remarks
("Carla paid 45 euros for the groceries." -> ``add_expense``) 4.8 to 6.4."""
_UNSURE_ODDS = 3.0
"""How many times as likely as none a bot's own action that shares no word with the message must be at the decision
for it to be called (``_decide``)."""
_SECOND_QUESTION = "(the second question)"
"""The key under which the deciding slot that last asked the second question (``_confirmed``) is remembered: its
worked examples (``CONFIRM_DEMOS``, some 1,000 tokens) stay there, warmed before the first message (``warm``), where
the decision's would take their place. Evaluated cold, they made a bot's first remark or output wait 9 s on two
cores."""
_STOP_WAIT = 30.0
"""Seconds a cancelled stream waits for llama.cpp to notice (it only can between tokens)."""


class LocalModel:
    """Answers with a GGUF model run in-process by llama.cpp, constrained to the response format.

    ``LocalModel()`` loads the installed default weights (``weights.DEFAULT_CHOICE``, the 0.5B), as
    ``LLM_PROVIDER=local`` does where ``LLM_LOCAL_MODEL=auto`` finds no room for the 1.5B (``auto.py``); ``weights=``
    names other packaged weights, ``model_path=`` any GGUF file."""

    vision = False
    prefers_compact = True
    """A model of a few hundred million parameters: ``create_agent`` gives it the compact prompt by default."""
    """Text only: attachments reach it as stand-in text."""
    model = ""
    """No provider model name: usage is counted under ``name``."""

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        weights: Weights | None = None,
        weights_dir: Path | None = None,
        context_size: int = 4096,
        threads: int = 0,
        spin: bool = False,
        temperature: float = 0.3,
        seed: int | None = None,
        use_grammar: bool = True,
        repeat_penalty: float = 1.1,
        frequency_penalty: float = 0.0,
        slots: int = 1,
        helpers: int = 4,
        cache_reuse: int = 16,
        warm_cache: bool = True,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        if model_path is not None and weights is not None:
            raise ValueError("LocalModel takes model_path or weights, not both")
        if model_path is None and weights is None:
            weights = CHOICES[DEFAULT_CHOICE]  # the installed default, as auto loads it on a small machine
        self.weights = weights
        """The packaged weights to assemble and check before loading (None: ``model_path`` as it is)."""
        self.weights_dir = weights_dir if weights_dir is not None else DEFAULT_WEIGHTS_DIR
        """Where multi-part ``weights`` are assembled (``LLM_WEIGHTS_DIR``)."""
        self.model_path = model_path if model_path is not None else self._weights_path()
        """The GGUF file (``LLM_MODEL_PATH``, or where ``weights`` are, once assembled)."""
        self.name = f"local:{weights.name if weights is not None else self.model_path.stem}"
        self.calls_tools = weights.tool_calls if weights is not None else calls_tools(self.model_path)
        """The chat template writes tool calls the grammar knows: the compact prompt may offer tools."""
        self.context_size = context_size
        """Tokens of prompt plus answer of one conversation (``LLM_CONTEXT_SIZE``)."""
        self.threads = threads or usable_cores()
        """CPU threads (``LLM_THREADS``; 0 means every core this process may use)."""
        self.spin = spin
        """The threads spin rather than sleep while they wait for each other within each token
        (``LLM_THREADS_WAIT=spin``): faster on cores of its own, much slower on busy ones; decided by the first
        load of llama.cpp in the process (``import_xllamacpp``)."""
        self.temperature = temperature
        """Sampling temperature (``LLM_TEMPERATURE``)."""
        self.seed = seed
        """Sampling seed; None draws a new one per answer."""
        self.use_grammar = use_grammar
        """Constrain answers to the response format (see ``grammar.py``); plain requests never are."""
        self.repeat_penalty = repeat_penalty
        """Penalty on repeating the last 128 tokens (small models loop on a sentence without one)."""
        self.frequency_penalty = frequency_penalty
        """Penalty growing with how often a token already appeared."""
        self.slots = max(1, slots)
        """Conversations kept warm at once (``LLM_SLOTS``), each in its own llama.cpp slot."""
        self.helpers = max(1, min(self.slots, helpers))
        """Slots for what belongs to no conversation (writing a tool call, a summary), and as many again to decide
        on a tool: so many conversations at once decide and call side by side (at most ``slots``)."""
        self.cache_reuse = cache_reuse
        """Smallest run of tokens (in a slid window) reused by shifting the cache instead of evaluating it."""
        self.warm_cache = warm_cache
        """Keep the slots ``warm`` evaluates on disk (``slot_cache``, in ``weights_dir``), so that the next process
        restores them in milliseconds instead of evaluating them for seconds."""
        self.progress = progress
        """Told what loading is doing (assembling, checking, loading the weights), one line at a time."""
        self.last_usage: ModelUsage | None = None
        """Token counts of the last answer (for metrics)."""
        self.last_tokens_per_second: float | None = None
        """Generation speed of the last answer, as llama.cpp measured it."""
        self.last_prompt_tokens: tuple[int, int] | None = None
        """Of the last answer's prompt: tokens taken from the cache, tokens evaluated."""
        self.load_seconds: float | None = None
        """How long loading the model took."""
        self._server: Any = None
        self._lock = threading.Lock()
        self._slot_of: OrderedDict[str, int] = OrderedDict()
        """Conversation -> slot, least recently active first."""
        self._busy: dict[int, int] = {}
        """Answers being generated per slot."""
        self._helper_of: OrderedDict[str, int] = OrderedDict()
        """Conversation -> the scratch slot its last tool call was written in, least recent first."""
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        """The threads that wait on llama.cpp, one per answer being generated (not the event loop's default pool,
        which other work shares: a conversation waiting for a thread would wait for others' answers)."""
        self._slot_dir: Path | None = None
        """Where llama.cpp saves a slot to copy it into others (``_copy_slot``), a folder of this process's own."""
        self._api_key = ""
        """The key of llama.cpp's HTTP endpoint, which slot actions go through."""
        self._cache: SlotCache | None = None
        """The warm cache of this model's setup (made by ``_load`` when ``warm_cache``)."""

    def __repr__(self) -> str:
        return f"LocalModel(model_path={str(self.model_path)!r}, threads={self.threads}, slots={self.slots})"

    @property
    def _scratch(self) -> range:
        """The slots of tool calls and summaries."""
        return range(self.slots, self.slots + self.helpers)

    @property
    def _deciding(self) -> range:
        """The slots that decide on a tool (with tools; else none)."""
        first = self.slots + self.helpers
        return range(first, first + (self.helpers if self.calls_tools else 0))

    def _weights_path(self) -> Path:
        assert self.weights is not None
        if len(self.weights.parts) == 1:  # used where pip put it
            with contextlib.suppress(ConfigError):
                return find_parts(self.weights)[0]
        return self.weights_dir / self.weights.filename

    @property
    def loaded(self) -> bool:
        """True once the weights are in memory."""
        return self._server is not None

    def ready(self) -> bool | str:
        """For ``/readyz``: True when loaded or loadable, else what is missing."""
        if self._server is not None:
            return True
        if self.weights is not None:
            return missing(self.weights, self.weights_dir) or True
        return True if self.model_path.is_file() else f"model file {self.model_path} is missing: check LLM_MODEL_PATH"

    async def load(self) -> None:
        """Assemble and check the weights, then load them (in a thread) instead of on the first answer."""
        if self._server is None:
            await asyncio.to_thread(self._load)

    async def warm(self, request: ModelRequest | None = None) -> None:
        """Load the model (``load``) and evaluate what every first answer needs, so that the first answer after
        the prompt appears costs no more than a later one: the decision's worked examples (the same for any bot's
        tools), and, given the ``request`` a conversation's first message will make, its decision prompt and its
        system prompt, in the slots that conversation will take, and a tool call's prompt (the system prompt and a
        tool listed) in the first scratch slot, where calls are written. Nothing is answered and no slot is claimed.

        Every other slot of each kind then gets a copy of what its first one holds (``_copy_slot``, milliseconds):
        several people's first messages at once find the worked examples and the system prompt evaluated. Left
        cold, each such slot evaluated them itself, all at once beside the others' answers: the decision's examples
        are some 800 tokens, and four people's first lines at once took 100 s each on two cores under load.

        With ``warm_cache``, each prompt evaluated here is saved to the warm cache, and a later start that warms the
        same prompts with the same weights and settings restores them from it (``slot_cache``): 0.1 s instead of
        10 to 25 s of a start on two cores."""
        await self.load()
        server = self._server
        started = time.perf_counter()
        self._say("warming up")
        bodies: list[dict[str, Any]] = []
        copies: list[tuple[int, list[int]]] = []  # (a slot warmed, the slots that get a copy of it)
        if request is not None:
            route = [self._route_body(request)] if self._offers_tools(request) else []
            taken = set(self._slot_of.values())
            free = [s for s in range(self.slots) if s not in taken] or [self._scratch[0]]
            bodies += [*route, self._body(request, slot=free[0])]
            if route:  # a tool call's prompt: the system prompt, then the tools listed by the chat template
                bodies.append(self._call_body(request, request.tools[0]))
                deciding = list(self._deciding[1:])
                if deciding and not _assistants(request):  # the second question's examples, in a slot of their own
                    bodies.append({**self._confirm_body(request, request.tools[0]), "id_slot": deciding.pop()})
                    self._helper_of[_SECOND_QUESTION] = bodies[-1]["id_slot"]
                copies += [(self._deciding[0], deciding), (self._scratch[0], list(self._scratch[1:]))]
                copies.append((free[0], free[1:]))
            else:  # (a summary's prompt starts with the same system prompt)
                copies.append((free[0], [s for s in [*free[1:], *self._scratch] if s != free[0]]))
        elif self.calls_tools:  # the worked examples any bot's tools are decided after
            bodies.append(self._route_probe_body())
            copies.append((self._deciding[0], list(self._deciding[1:])))
        else:
            bodies.append(self._body(ModelRequest(system="", prompt="Hello", plain=True), slot=self._scratch[0]))
        restored = 0
        for body in bodies:
            restored += await self._warm_slot(server, {**body, "max_tokens": 1}, base=self._base_of(body))
        for source, targets in copies:
            if targets:
                await asyncio.to_thread(self._copy_slot, server, source, targets)
        seconds = time.perf_counter() - started
        if self._cache is not None:
            folder = self._cache.folder
            log.info("warmed up in %.2fs: %d of %d prompts restored from %s", seconds, restored, len(bodies), folder)
        self._say(f"warmed up ({seconds:.1f} s)")

    def _route_probe_body(self) -> dict[str, Any]:
        """The decision's prompt for a bot's own tools with a probe for a message: the worked examples (some 2,400
        tokens, the same for every bot) then a question no bot asks."""
        demo = ToolSpec(name="none_of_these", description="(warming up)")
        probe = ModelRequest(system="", prompt="", plain=True, turns=(("user", "Hello"),), tools=(demo,))
        return self._route_body(probe)

    def _base_of(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What ``body`` starts with that any other bot's would too, to be warmed first when ``body`` is not in the
        warm cache: a decision's prompt for a bot's own tools starts with the worked examples, which the probe's
        prompt (``_route_probe_body``) holds, so a bot's first start evaluates only its own part where another bot
        started before it."""
        messages = body.get("messages") or [{}]
        if self._cache is None or messages[0].get("content") != ROUTE_TASK:
            return None
        probe = {**self._route_probe_body(), "max_tokens": 1}
        return None if probe["messages"] == messages else probe

    async def _warm_slot(self, server: Any, body: dict[str, Any], *, base: dict[str, Any] | None = None) -> bool:
        """Warm the slot ``body`` names with it: restored from the warm cache (``slot_cache``) when it holds it
        (True), else evaluated, then kept there for the next start. ``base``, a prompt ``body`` starts with, is
        warmed first in the same slot (restored, or evaluated and kept), so that only the rest is evaluated."""
        cache = self._cache
        if cache is None:
            await self._collect(server, body)
            return False
        key = cache.key(body)
        if await asyncio.to_thread(self._restore_warm, server, cache, key, body["id_slot"]):
            return True
        claim = await asyncio.to_thread(cache.claim, key)  # (another process evaluating it: wait, then restore)
        try:
            if claim.waited and await asyncio.to_thread(self._restore_warm, server, cache, key, body["id_slot"]):
                return True
            if base is not None:
                await self._warm_slot(server, base)
            await self._collect(server, body)
            await asyncio.to_thread(self._keep_warm, server, cache, key, body["id_slot"])
        finally:
            claim.release()
        return False

    def _restore_warm(self, server: Any, cache: SlotCache, key: str, slot: int) -> bool:
        """Restore the warm cache's file of ``key`` into ``slot``: False when there is none, or it is damaged or
        refused (removed then: the slot is evaluated and saved again)."""
        assert self._slot_dir is not None
        name = f"warm-{slot}.bin"
        private = self._slot_dir / name
        try:
            used = cache.fetch(key, private)
            if used is None:
                log.info("the embedded model's warm cache has no slot %s; it is evaluated", key)
                return False
            try:
                answer = self._slot_action(server, slot, "restore", name)
                if not answer.get("n_restored", 1):
                    raise ValueError("no token restored")
            except (OSError, ValueError) as exc:
                log.warning("llama.cpp refused the warm cache file %s (%s); it is evaluated", used, exc)
                cache.forget(used)
                return False
            return True
        finally:
            private.unlink(missing_ok=True)

    def _keep_warm(self, server: Any, cache: SlotCache, key: str, slot: int) -> None:
        """Save ``slot`` (just warmed by evaluating) into the warm cache under ``key``."""
        assert self._slot_dir is not None
        if cache.unwritable:
            return
        name = f"warm-{slot}.bin"
        try:
            self._slot_action(server, slot, "save", name)
            cache.keep(key, self._slot_dir / name)
        except (OSError, ValueError) as exc:
            log.warning("saving the embedded model's slot %d for the warm cache failed (%s)", slot, exc)
        finally:
            (self._slot_dir / name).unlink(missing_ok=True)

    def _copy_slot(self, server: Any, source: int, targets: Sequence[int]) -> None:
        """Give each of the idle slots ``targets`` what slot ``source`` holds, through llama.cpp's slot actions
        (saved to a file of ``_slot_dir``, restored from it): milliseconds, where evaluating it again takes seconds.
        A copy that fails leaves the slot as it was (its first request evaluates its prompt itself)."""
        if self._slot_dir is None:  # (not loaded by ``_load``)
            return
        name = f"slot-{source}.bin"
        try:
            self._slot_action(server, source, "save", name)
            for target in targets:
                self._slot_action(server, target, "restore", name)
        except (OSError, ValueError) as exc:
            log.warning("copying the embedded model's slot %d failed (%s); the others start cold", source, exc)
        finally:
            (self._slot_dir / name).unlink(missing_ok=True)

    def _slot_action(self, server: Any, slot: int, action: str, name: str) -> dict[str, Any]:
        """``action`` (save, restore) on ``slot`` with the file ``name``, by llama.cpp's own HTTP endpoint (the only
        way xllamacpp offers), on the loopback address, with the key only this process knows."""
        request = urllib.request.Request(
            f"{server.listening_address}/slots/{slot}?action={action}",
            data=json.dumps({"filename": name}).encode(),
            headers={"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=_STOP_WAIT) as response:
            answer = json.loads(response.read() or b"{}")
        if not isinstance(answer, dict) or "error" in answer:
            raise ValueError(str(answer.get("error") if isinstance(answer, dict) else answer))
        return answer

    def close(self) -> None:
        """Free the model; the next answer loads it again."""
        with self._lock:
            self._server = None
            self._cache = None
            self._slot_of.clear()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None
            if self._slot_dir is not None:
                shutil.rmtree(self._slot_dir, ignore_errors=True)
                self._slot_dir = None

    def _say(self, line: str) -> None:
        if self.progress is not None:
            try:
                self.progress(line)
            except Exception:  # a broken terminal must not stop the model
                log.debug("the progress callback failed", exc_info=True)

    def _prepare(self) -> Path:
        """The checked GGUF file (assembled first if needed)."""
        if self.weights is None:
            check_gguf(self.model_path)
            return self.model_path
        weights = self.weights
        shown = {"step": "", "tenth": -1}
        words = {"assemble": "assembling the weights", "verify": "checking the weights"}

        def report(step: str, done: int, total: int) -> None:
            tenth = done * 10 // max(1, total)
            if step != shown["step"] or tenth != shown["tenth"]:
                shown.update(step=step, tenth=tenth)
                self._say(f"{words.get(step, step)} of {weights.title} ({total // 1_000_000} MB): {tenth * 10}%")

        path = prepare(weights, self.weights_dir, progress=report)
        self.model_path = path
        return path

    def _load(self) -> Any:
        with self._lock:
            if self._server is not None:
                return self._server
            xllamacpp = import_xllamacpp(
                "LLM_PROVIDER=local needs xllamacpp: run pip install '.[local]' (or choose LLM_PROVIDER=openai)",
                spin=self.spin,
            )
            started = time.perf_counter()
            path = self._prepare()
            self._say(f"loading {path.name}")
            params = server_params(xllamacpp, path, threads=self.threads)
            self._slot_dir = Path(tempfile.mkdtemp(prefix="llama-slots-"))
            # removed by ``close``, or when the process ends without it
            weakref.finalize(self, shutil.rmtree, self._slot_dir, ignore_errors=True)
            params.slot_save_path = f"{self._slot_dir}{os.sep}"  # (llama.cpp joins it to a file's name as it is)
            self._api_key = params.api_keys[0]
            # one KV cache of context_size tokens per slot: a conversation keeps its slot, so its next turn
            # evaluates only what is new
            # (and ``helpers`` more for what belongs to no conversation: summaries, tool calls; with tools as many
            # again to decide on a tool, see ``stream``): llama.cpp batches the slots' tokens together
            params.n_parallel = self.slots + len(self._scratch) + len(self._deciding)
            params.cont_batching = True
            params.n_ctx = self.context_size * params.n_parallel
            params.kv_unified = False
            params.n_cache_reuse = self.cache_reuse
            params.cache_ram_mib = 256
            template = gguf_chat_template(path)
            if template is not None:
                params.chat_template = template
            try:
                server = xllamacpp.Server(params)
            except Exception as exc:
                raise ModelError(
                    f"llama.cpp could not load {path.name}: {exc}; check LLM_MODEL_PATH, LLM_CONTEXT_SIZE and LLM_SLOTS"
                ) from exc
            if self.warm_cache:
                folder = writable_folder(self.weights_dir / SLOT_FOLDER, user_cache_dir() / SLOT_FOLDER)
                self._cache = SlotCache(folder, self._identity(xllamacpp, path, params))
            self.load_seconds = time.perf_counter() - started
            log.info(
                "loaded %s in %.2fs (%d threads, %d slots)", path.name, self.load_seconds, self.threads, self.slots
            )
            self._say(f"model ready ({self.load_seconds:.1f} s)")
            self._server = server
            return server

    def _identity(self, xllamacpp: Any, path: Path, params: Any) -> Identity:
        """What decides a warmed slot besides its prompt (``slot_cache.Identity``)."""
        if self.weights is not None:
            model = f"sha256:{self.weights.sha256}"  # (checked by ``_prepare``)
        else:
            stat = path.stat()
            model = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        return Identity(
            model=model,
            llama=str(getattr(xllamacpp, "__version__", "")),
            context_size=self.context_size,
            slots=int(params.n_parallel),
            batch=int(params.n_batch),
            ubatch=int(params.n_ubatch),
            cache_types=f"{params.cache_type_k}/{params.cache_type_v}/{params.flash_attn_type}",
            chat_template=str(params.chat_template or ""),
        )

    # -- slots ---------------------------------------------------------------------------------------------

    def _take_slot(self, key: str | None) -> int:
        """The slot of conversation ``key`` (None: the scratch slot). A new conversation takes a free slot, else
        the one of the least recently active conversation that is not generating."""
        if key is None:
            return self.slots  # the scratch slot
        slot = self._slot_of.pop(key, None)
        if slot is None:
            taken = set(self._slot_of.values())
            free = [s for s in range(self.slots) if s not in taken]
            if free:
                slot = free[0]
            else:
                victim = next((k for k, s in self._slot_of.items() if not self._busy.get(s)), None)
                slot = self._slot_of.pop(victim if victim is not None else next(iter(self._slot_of)))
        self._slot_of[key] = slot
        self._busy[slot] = self._busy.get(slot, 0) + 1
        return slot

    def _take_helper(self, pool: range, key: str | None = None) -> int:
        """A slot of ``pool`` (``_scratch`` or ``_deciding``) for one request: the one conversation ``key`` used
        last if it is idle (its tool call's prompt is mostly there already), else the first idle one (the first is
        the one warmed up), else the least busy."""
        last = self._helper_of.get(key, -1) if key is not None else -1
        if last in pool and not self._busy.get(last, 0):
            slot = last
        else:
            slot = min(pool, key=lambda s: (self._busy.get(s, 0) > 0, self._busy.get(s, 0), s))
        if key is not None:
            self._helper_of.pop(key, None)
            self._helper_of[key] = slot
            while len(self._helper_of) > 4 * len(pool):  # the least recent ones are forgotten
                self._helper_of.pop(next(iter(self._helper_of)))
        self._busy[slot] = self._busy.get(slot, 0) + 1
        return slot

    async def _helped(self, server: Any, body: dict[str, Any], key: str | None = None) -> str:
        """``body`` answered whole in a helper slot (``_helper_slot``)."""
        with self._helper_slot(body, key) as slot:
            return await self._collect(server, {**body, "id_slot": slot})

    @contextlib.contextmanager
    def _helper_slot(self, body: dict[str, Any], key: str | None = None) -> Iterator[int]:
        """A helper slot of the pool ``body``'s ``id_slot`` belongs to (deciding or scratch), the one conversation
        ``key`` used last when it can; released after."""
        pool = self._deciding if body.get("id_slot") in self._deciding else self._scratch
        slot = self._take_helper(pool, key)
        try:
            yield slot
        finally:
            self._release_slot(slot)

    def _release_slot(self, slot: int) -> None:
        if slot >= 0:
            self._busy[slot] = max(0, self._busy.get(slot, 0) - 1)

    # -- requests ------------------------------------------------------------------------------------------

    def _messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The chat messages of ``request``. A tool call and its result join the user's message they answer, as
        ``(the result of NAME: RESULT)``: a model of this size answers from a result given that way, but reads a
        result in the template's own tool turn as something to explain or call again."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        if not request.turns:
            messages.append({"role": "user", "content": request.prompt})
            return messages
        called = ""
        turns = request.turns
        for index, (role, text) in enumerate(turns):
            if role == "tool_call":
                call = parse_tool_call(text)
                called = call.name if call is not None else ""
            elif role == "tool" and _failed(text) and _mended(turns[index + 1 :]):
                continue  # a failed call the next one mended: the model answers from what worked
            elif role == "tool":
                note = result_note(called or "a tool", _readable(text))
                if messages and messages[-1]["role"] == "user":
                    messages[-1]["content"] += f"\n\n{note}"
                else:
                    messages.append({"role": "user", "content": note})
            elif messages and messages[-1]["role"] == role:
                messages[-1]["content"] += f"\n{text}"
            else:
                messages.append({"role": role, "content": text})
        return messages

    def _offers_tools(self, request: ModelRequest) -> bool:
        """A plain request with tools, to a model that calls them, whose last turn is the user's."""
        return (
            bool(request.tools)
            and request.plain
            and self.calls_tools
            and bool(request.turns)
            and request.turns[-1][0] == "user"
        )

    def _retries(self, request: ModelRequest) -> bool:
        """A plain request with tools, to a model that calls them, whose last turn is the failure of the first call
        made for the user's message (``_tried``), or of a second one that turned to another tool: the call is
        written once more, with the error in view (the same tool twice at most: ``_retry_tool``)."""
        tried = _tried(request)
        return (
            bool(request.tools)
            and request.plain
            and self.calls_tools
            and bool(request.turns)
            and request.turns[-1][0] == "tool"
            and (len(tried) == 1 or (len(tried) == 2 and tried[0] != tried[1]))
        )

    def _body(self, request: ModelRequest, *, slot: int = -1) -> dict[str, Any]:
        """The request as llama.cpp takes it: the reply (plain, or in the response format under its grammar)."""
        body: dict[str, Any] = {
            "messages": self._messages(request),
            "max_tokens": request.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,
            "id_slot": slot,
            # small models loop on a sentence without these
            "repeat_penalty": self.repeat_penalty,
            "repeat_last_n": 128,
            "frequency_penalty": self.frequency_penalty,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.use_grammar and not request.plain:
            # the grammar ends the answer at </response>; a stop string inside free text would break it
            body["grammar"] = grammar_for(request)
        elif request.stop:
            body["stop"] = list(request.stop)
        return body

    def _route_body(self, request: ModelRequest) -> dict[str, Any]:
        """Which tool the user's last message needs, if any: a short prompt of its own answered with one name under
        a grammar. The built-in assistant's tools (some have examples here) are decided with those examples; a bot's
        own tools after worked examples with tools of other bots (``ROUTE_DEMOS``): each message comes with the list
        of tools it may use, so the model learns the task, not the names."""
        offered = {t.name for t in request.tools}
        messages: list[dict[str, Any]]
        if _assistants(request):  # the built-in assistant's tools (and the reminders, MCP tools beside them)
            listed = "\n".join(f"- {t.name}: {' '.join(t.description.split())[:300]}" for t in request.tools)
            messages = [
                {
                    "role": "system",
                    "content": "Decide which tool a message needs, if any. The tools:\n"
                    f"{listed}\n- none: the message needs no tool (most messages).\nAnswer with one name.",
                }
            ]
            for text, name in ROUTE_EXAMPLES:
                if name == "none" or name in offered:
                    messages += [{"role": "user", "content": text}, {"role": "assistant", "content": name}]
            messages.append({"role": "user", "content": request.turns[-1][1]})
        else:
            messages = [{"role": "system", "content": ROUTE_TASK}]
            for tools, earlier, text, name in ROUTE_DEMOS:
                messages += [
                    {"role": "user", "content": route_question(tools, text, earlier=earlier)},
                    {"role": "assistant", "content": name},
                ]
            # the tools in the bot's order, the same for every message: the list stays in the slot's cache
            mine = [(signature(t), " ".join(t.description.split())[:300]) for t in request.tools]
            question = route_question(mine, request.turns[-1][1], earlier=_earlier(request))
            messages.append({"role": "user", "content": question})
        names = [*(t.name for t in request.tools), "none"]
        return {
            "messages": messages,
            "max_tokens": 16,
            "temperature": 0.0,
            "stream": True,
            "cache_prompt": True,
            "id_slot": self._deciding[0],
            "grammar": "root ::= " + " | ".join(_gbnf_string(n) for n in names) + "\n",
        }

    def _confirm_body(self, request: ModelRequest, tool: ToolSpec) -> dict[str, Any]:
        """Whether the user's last message asks for ``tool`` at all: ``yes`` or ``no`` under a grammar, after the
        worked examples asked that way (``CONFIRM_DEMOS``), in the decision's slot."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": CONFIRM_TASK}]
        for listed, earlier, text, answer in CONFIRM_DEMOS:
            messages += [
                {"role": "user", "content": confirm_question(listed, text, earlier=earlier)},
                {"role": "assistant", "content": answer},
            ]
        shown = (signature(tool), " ".join(tool.description.split())[:300])
        question = confirm_question(shown, request.turns[-1][1], earlier=_earlier(request))
        messages.append({"role": "user", "content": question})
        return {
            "messages": messages,
            "max_tokens": 2,
            "temperature": 0.0,
            "stream": True,
            "cache_prompt": True,
            "id_slot": self._deciding[0],
            "grammar": 'root ::= "yes" | "no"\n',
        }

    def _call_body(self, request: ModelRequest, *tools: ToolSpec) -> dict[str, Any]:
        """The call of one of ``tools``: the conversation with them listed by the chat template, and a grammar that
        only lets the model write a call of one of them with arguments of its schema. For one tool (the decision
        chose it), the start of its call the grammar fixes (tags, name, first key: ``tool_call_start``) ends the
        prompt as the assistant's turn begun (llama.cpp prefills it): evaluated in one batch with the prompt instead
        of written under the grammar a token at a time, the model writes only the rest (``bench/local_speed.py``'s
        calls: 8 tokens written where they were 31)."""
        body = self._body(request, slot=self._scratch[0])
        body.pop("stop", None)
        body["tools"] = [_tool_json(tool) for tool in tools]
        body["tool_choice"] = "none"  # our grammar, not llama.cpp's, shapes the call
        start = ""
        if len(tools) == 1:  # (an identifier only among the numbers the conversation shows: ``narrowed``; not
            # a value its failed call gave: ``offered_again``)
            tool = narrowed(tools[0], request)
            failed = _failed_call(request)
            if failed is not None and failed[0].name == tool.name:
                tool = offered_again(tool, *failed, request)
            start, body["grammar"] = tool_call_start(tool, limits=_CALL_LIMITS)
        else:
            body["grammar"] = tool_call_grammar(tools, text=False, limits=_CALL_LIMITS)
        body["temperature"] = 0.0
        body["max_tokens"] = max(request.max_tokens, _CALL_TOKENS)  # a call cut short is lost
        note = _day_note(request, *tools)
        messages = body["messages"]
        if note and messages and messages[-1]["role"] == "user":
            # under the message, not in the system part: the conversation's prefix stays the one cached
            messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n({note})"}
        if start:
            body["messages"] = [*body["messages"], {"role": "assistant", "content": start}]
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Generate the answer in a worker thread and stream it; cancelling stops the generation. With tools, the
        model first says which one the message needs (if any); a tool call comes out whole, as
        ``<response><action_call name="...">{json}</action_call></response>``. An output of text alone is the
        plain answer, written to it (``_in_own_words``)."""
        server = self._server if self._server is not None else await asyncio.to_thread(self._load)
        declined = False  # (a bot's own actions offered, none decided on: an answer may not claim one done)
        if self._offers_tools(request):
            tool = await self._decide(server, request)
            second = tool is None
            if tool is None:
                tool = await self._second_look(server, request)
            elif tool.output and not await self._confirmed(server, request, tool):
                log.info("the local model named the output %s but does not confirm it; it answers plainly", tool.name)
                tool = None
            elif tool.output and _in_own_words(tool):
                yield await self._output_in_own_words(server, request, tool)
                return
            elif (
                not tool.output
                and _remarked(request)
                and not await self._confirmed(server, request, tool, odds=_REMARK_ODDS)
            ):
                log.info("the local model named %s for a remark and does not confirm it; it answers plainly", tool.name)
                tool = None
            declined = tool is None and not _assistants(request)
            if tool is not None:
                key = request.metadata.get("context_id")
                written = await self._write_call(server, request, tool, key)
                call = parse_tool_call(written)
                said = _said(request, tool)
                if call is not None and not tool.output and (mended := unborrowed(call, tool, said)) is not call:
                    log.info("the local model's call of %s copied the tool's description; that part is cut", tool.name)
                    call, written = mended, json.dumps({"name": mended.name, "arguments": mended.arguments})
                if second and call is not None and not stated(call, tool, said):
                    log.info("the local model's call of %s holds what the message does not say; no tool", tool.name)
                elif call is None or tool.output or (grounded(call, tool, request) and not repeated(call, request)):
                    async for text in _tool_or_text(_once(written), (tool,)):
                        yield text
                    return
                elif (
                    overlap(message := _last_said(request), described(tool))  # (it asks for what the tool does)
                    and (bare := without_unstated(call, tool, f"{message}\n{_day_note(request, tool)}")) is not call
                    and grounded(bare, tool, request)
                    and not repeated(bare, request)
                ):
                    log.info("the local model's call of %s gave what the message does not say; its defaults", tool.name)
                    yield bare.as_action_call()
                    return
                log.info(
                    "the local model made up (or copied) the arguments of %s (%s); it answers without it",
                    tool.name,
                    written,
                )
        elif self._retries(request):  # the first call failed: once more, the error in view
            tool = await self._retry_tool(server, request)
            if tool is not None:
                written = await self._write_call(server, request, tool, request.metadata.get("context_id"))
                async for text in _tool_or_text(_once(written), (tool,)):
                    yield text
                return
        if request.metadata.get("purpose"):  # a summary: a scratch slot, never a conversation's
            slot = self._take_helper(self._scratch)
        else:
            slot = self._take_slot(request.metadata.get("context_id"))
        try:
            body = self._body(request, slot=slot)
            if _after_tool(request):
                yield await self._answer_after_tool(server, body, request)
                return
            last = request.turns[-1] if request.plain and request.turns else ("", "")
            reason = failure_reason(last[1]) if last[0] == "tool" else None
            if reason is not None:  # (its retry failed too, or had nothing to retry with)
                yield await self._answer_after_failure(server, body, request, reason)
                return
            generated = self._generate(server, body)
            if request.plain and request.kept:
                generated = self._uncopied(server, body, request, generated)
            guarded = _guarded(generated, request) if request.plain else generated
            if declined:
                guarded = self._unclaimed(server, body, request, guarded)
            async with contextlib.aclosing(generated), contextlib.aclosing(guarded) as texts:
                async for text in texts:  # closed with the stream: the generation stops at once
                    yield text
        finally:
            self._release_slot(slot)

    async def _uncopied(
        self, server: Any, body: dict[str, Any], request: ModelRequest, chunks: AsyncGenerator[str, None]
    ) -> AsyncGenerator[str, None]:
        """The plain answer as it streams; one that starts by copying what the prompt shows the conversation keeps
        (``copies_kept``: "I'm flying to Lisbon on Friday." -> "The conversation keeps: Todo list: 1. buy milk ...
        4. go to Lisbon", an item made up) is written again without that part of the prompt ("Good luck with your
        flight!"). To a question the copy may be the answer ("What's on my list?"): it is kept, its lead cut."""
        head = ""
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                head += chunk
                copying = copies_kept(head, request.kept)
                if copying is None:
                    continue
                if not copying:
                    yield head
                    async for rest in chunks:
                        yield rest
                    return
                break
            else:
                if head:
                    yield head
                return
            if _last_said(request).rstrip().endswith(("?", "？", "؟")):
                yield spoken(head + "".join([rest async for rest in chunks]))
                return
        log.info("the local model copied what the conversation keeps into its answer; it answers without it")
        async for chunk in self._generate(server, {**body, "messages": _without(body["messages"], request.kept)}):
            yield chunk

    async def _unclaimed(
        self, server: Any, body: dict[str, Any], request: ModelRequest, chunks: AsyncGenerator[str, None]
    ) -> AsyncGenerator[str, None]:
        """The plain answer to a message no action was decided for, as it streams once its first two sentences
        say no action of the bot's was done (``claimed``). The tutorial's bot, asked "Please add call the bank."
        after "Add buy bread to my list.", decided on none (``add`` at 0.44 against ``none``'s 0.53) and answered
        "I added `call the bank` to my list.", as it had answered the line before: nothing was added. An answer
        that claims an action is not given: to a request (not a ``remark``) that shares a word with the action
        (``overlap``, as the second look asks), the action is called, its call written as for a decision and kept
        when the person said its arguments (``stated``); else the answer is written again without sampling, and
        what it still claims is cut ("Hello there!" answered "Done, it is cancelled." cancels nothing)."""
        actions = [t.name for t in request.tools if not t.output]
        head, name = "", None
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                head += chunk
                name = claimed(head, actions)
                if name is not None:
                    break
                if sentences(head) > 2:  # two whole sentences claim nothing: the rest as it comes
                    yield head
                    async for rest in chunks:
                        yield rest
                    return
            else:
                if head:
                    yield head
                return
        tool = next(t for t in request.tools if t.name == name)
        message = _last_said(request)
        if not remark(message) and overlap(message, described(tool)):
            written = await self._write_call(server, request, tool, request.metadata.get("context_id"))
            call = parse_tool_call(written)
            if (
                call is not None
                and stated(call, tool, _said(request, tool))
                and grounded(call, tool, request)
                and not repeated(call, request)
            ):
                log.info("the local model's answer says it did %s, which the decision did not name; it calls it", name)
                async for text in _tool_or_text(_once(written), (tool,)):
                    yield text
                return
        log.info("the local model's answer says it did %s, which nobody asked for; it answers again", name)
        again = (await self._collect(server, {**body, "temperature": 0.0})).strip()
        yield unclaimed(again, name) or unclaimed(head, name) or _NOTHING_DONE

    async def _output_in_own_words(self, server: Any, request: ModelRequest, output: ToolSpec) -> str:
        """``output`` (of text alone: ``_in_own_words``) with the plain answer as its text, written in the
        conversation's slot; when the model refuses that answer ("Show me my bookings." -> "I'm sorry, but I can't
        assist with that request."), the output written as a call, as for any other output."""
        key = request.metadata.get("context_id")
        slot = self._take_slot(key)
        try:
            answer = (await self._collect(server, self._body(request, slot=slot))).strip()
        finally:
            self._release_slot(slot)
        if answer and not is_refusal(answer):
            return ToolCall(name=output.name, arguments={output.output: answer}).as_output(output.output)
        log.info("the local model refused to answer for the output %s; it writes it as a call", output.name)
        written = await self._write_call(server, request, output, key)
        return "".join([text async for text in _tool_or_text(_once(written), (output,))])

    async def _answer_after_tool(self, server: Any, body: dict[str, Any], request: ModelRequest) -> str:
        """The answer after a successful tool, whole: one that refuses, shows nothing of the result
        (``answer_guards.shows_result``) or tells of it as an onlooker ("The result says that ...", "The
        conversation keeps: ...": ``narrates``) is written once more without sampling; the one that shows the
        result in the person's voice is kept, else the one that shows it, its telling lead cut (``spoken``); if
        neither shows the result, it is the answer itself (``fallback_answer``)."""
        result = request.turns[-1][1]
        message = _last_said(request)
        answers = [unnoted(await self._collect(server, body))]
        first = answers[0]
        if is_refusal(first) or not shows_result(first, result, message) or narrates(first) or labelled(first, result):
            log.info("the local model's answer after a tool left out, told of or copied its result; it writes it again")
            answers.append(unnoted(await self._collect(server, {**body, "temperature": 0.0})))
        usable = [a for a in answers if a.strip() and not is_refusal(a)]
        if not usable:
            log.info("the local model refused after a successful tool; its result is the answer")
            return fallback_answer(_readable(result))
        shown = [a for a in usable if shows_result(a, result, message)]
        if not shown:  # twice as if it had not read the result: the result, not an answer that contradicts it
            log.info("the local model answered twice without the result of its tool; the result is the answer")
            return fallback_answer(_readable(result))
        said = next((a for a in shown if not narrates(a) and not labelled(a, result)), None)
        said = said or next((a for a in shown if not narrates(a)), shown[0])
        return in_results_words(spoken(unlabelled(said, result)), result)

    async def _answer_after_failure(self, server: Any, body: dict[str, Any], request: ModelRequest, reason: str) -> str:
        """The answer after a tool whose handler failed, whole: kept when it says why (shows something of
        ``reason`` the message does not hold) in the person's voice; else the reason itself
        (``failure_answer``). Told that ``remove_todo`` found "no todo like 'take it off my list'", the model
        answered "The conversation keeps a list of tasks and attempts to remove one item from it." and "The
        conversion from dollars to yen results in an error" for "unknown currency: use one of EUR, USD, ..."."""
        message = _last_said(request)
        answer = unnoted(await self._collect(server, body))
        if answer.strip() and not narrates(answer) and shows_result(answer, json.dumps(reason), message):
            return answer
        log.info("the local model's answer after a failed tool did not say why; the reason is the answer")
        return failure_answer(reason)

    async def _write_call(self, server: Any, request: ModelRequest, tool: ToolSpec, key: str | None) -> str:
        """The call of ``tool`` for ``request``, whole (in a scratch slot, the one conversation ``key`` used last
        when it can): the start its grammar fixes, given in the prompt (``_call_body``), and what the model wrote
        after it. A tool that takes no arguments (``takes_arguments``) is called without asking the model."""
        if not takes_arguments(tool):
            return whole_call(tool)
        body = self._call_body(request, tool)
        last = body["messages"][-1]
        start = last["content"] if last["role"] == "assistant" else ""
        return start + await self._helped(server, body, key)

    async def _confirmed(
        self, server: Any, request: ModelRequest, tool: ToolSpec, *, odds: float = _CONFIRM_ODDS
    ) -> bool:
        """Whether the user's last message asks for the output ``tool`` the decision named, asked once more on its
        own (``_confirm_body``). An output fetches nothing and does nothing: it only takes the place of the reply,
        and the decision names one for any message with its words ("How many items are on my todo list?" ->
        ``todo:list``, whose reply is then "3" shown as the list). Declined, the plain reply still shows what the
        output would have, the state being in its prompt; an action declined wrongly would be lost, and asked
        this way the model declines some that are needed (questions), so an action is asked twice only for a
        remark (``_remarked``: "The tea needs 4 minutes." -> ``set_timer``), at ``_REMARK_ODDS``, and for a
        request that shares no word with it (``_decide``).

        A yes counts when the model finds it at least ``odds`` times as likely as a no: the outputs asked for were
        confirmed at 0.85 to 0.92 (``bench/tools.py``'s three bots), a question about the bot's domain that asks
        for none at 0.64 ("What is a fair way to split a bill?" -> the group's expenses shown)."""
        answer, first = await self._answer_weighed(server, self._confirm_body(request, tool), _SECOND_QUESTION)
        if answer == "no":
            return False
        yes, no = first.get("yes", 0.0), first.get("no", 0.0)
        return not (yes or no) or yes >= odds * no  # (none given: the answer)

    async def _decide(self, server: Any, request: ModelRequest) -> ToolSpec | None:
        """The tool the decision (``_route_body``) names for the user's last message, or None. A bot's own action
        that shares no word with the message (``overlap``) and that the model found less than ``_UNSURE_ODDS``
        times as likely as none (the first token of its name against ``none``'s, before the grammar) is taken as
        none: "Say hi to my friend Tom." was decided as ``add_todo`` at 2.6 times none (its call: "Hi Tom! How are
        you?" added as a todo), and lines said before a question ("I work from home on Thursday." -> ``calendar``)
        at 1.7 to 2.9 times. The requests ``bench/tools.py``'s bots need an action for that share no word with it
        were decided at 3.7 times none or more ("Is it cold in Helsinki right now?" -> ``weather``), those that
        share one as low as 1.4 times: a word of the tool's keeps the decision.

        Such an action decided for a message that is neither a question nor a remark (those are asked again in
        ``stream``) is asked about once more (``_confirmed``, at ``_CONFIRM_ODDS``): Tom's ``add_todo`` was decided
        at 7.6 times none with the tools in the bot's order, and the second question's yes was 1.2 times its no,
        against 2.5 to 3.6 for the requests of that form ("Multiply 48 by 12 for me." -> ``compute``, "Carla bought
        the train tickets." -> ``add_expense``). A question is not asked again: the second question's yes is below
        its no for questions that need the tool ("Is it cold in Helsinki right now?" -> ``weather``, 0.6)."""
        answer, first = await self._answer_weighed(server, self._route_body(request))
        tool = next((t for t in request.tools if t.name == answer), None)
        if tool is None or tool.output or _assistants(request):
            return tool  # (an output is asked about again: ``_confirmed``; the assistant's tools have examples)
        message = request.turns[-1][1]
        likely = max((p for token, p in first.items() if token.strip() and tool.name.startswith(token)), default=0.0)
        none = first.get("none", 0.0)
        log.debug("the local model decided on %s at %.3f, none at %.3f", tool.name, likely, none)
        if overlap(message, described(tool)):
            return tool
        if none and likely < _UNSURE_ODDS * none:
            log.info(
                "the local model decided on %s at %.1f times none, for a message that shares no word with it; no tool",
                tool.name,
                likely / none,
            )
            return None
        if "?" not in message and not remark(message) and not await self._confirmed(server, request, tool):
            log.info("the local model decided on %s for a request that shares no word with it; unconfirmed", tool.name)
            return None
        return tool

    async def _answer_weighed(
        self, server: Any, body: dict[str, Any], key: str | None = None
    ) -> tuple[str, dict[str, float]]:
        """``body`` answered whole in a helper slot (the one ``key`` used last when it can), with how likely the
        model found each of the likeliest first tokens (before the grammar: ``top_logprobs``)."""
        asked = {**body, "stream": False, "logprobs": True, "top_logprobs": 8}
        with self._helper_slot(asked, key) as slot:
            chunks = await self._answer_whole(server, {**asked, "id_slot": slot})
        answer, first = "", {}
        for chunk in chunks:
            for choice in chunk.get("choices") or ():
                answer += str((choice.get("message") or choice.get("delta") or {}).get("content") or "")
                tops = ((choice.get("logprobs") or {}).get("content") or [{}])[0].get("top_logprobs") or ()
                for top in tops:
                    if isinstance(top.get("token"), str) and top["token"] not in first:
                        first[top["token"]] = math.exp(float(top.get("logprob", -math.inf)))
        return answer.strip(), first

    async def _answer_whole(self, server: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
        """``body`` (not streamed) answered by llama.cpp: its chunks, whole (with the probabilities it asks for)."""
        chunks: list[dict[str, Any]] = []

        def answer() -> None:
            server.handle_chat_completions(
                body, lambda chunk: chunks.append(chunk) if isinstance(chunk, dict) else None
            )

        await asyncio.get_running_loop().run_in_executor(self._workers(), answer)
        for chunk in chunks:
            if "error" in chunk:
                raise ModelError(self._describe(chunk["error"]))
        return chunks

    async def _second_look(self, server: Any, request: ModelRequest) -> ToolSpec | None:
        """The action a message decided as needing no tool asks for after all, if any: the one it shares the most
        words with (``closest_action``), asked about on its own (``_confirm_body``: does the message ask for it?).
        The decision, choosing among all the tools and none, says none for some requests ("We are 7 people, book
        us inside on ..."), and the plain reply then claims the action done without it; asked about one tool, the
        model tells a request from a near miss. In a scratch slot: the decision's slot keeps its worked examples.
        The built-in assistant's tools, decided after examples of their own, only for a request that says a tool's
        name (``named``): "I am a vegetarian, please remember that." was decided as none."""
        if _assistants(request):
            tool = named(request.turns[-1][1], [t for t in request.tools if t.name in _ASSISTANT_TOOLS])
        else:
            tool = closest_action(request.turns[-1][1], request.tools, earlier=_earlier(request))
        if tool is None:
            return None
        body = {**self._confirm_body(request, tool), "id_slot": self._scratch[0]}
        if (await self._helped(server, body, request.metadata.get("context_id"))).strip() != "yes":
            return None
        log.info("the local model decided on no tool, but says the message asks for %s; it calls it", tool.name)
        return tool

    async def _retry_tool(self, server: Any, request: ModelRequest) -> ToolSpec | None:
        """The tool to call once more after the first call for the user's message failed: another one if the
        decision, asked again among the actions that share more words with the person's last two lines than the
        failed one, names one (a small model confuses tools whose names are alike: ``convert`` for money beside
        ``exchange``; "How much is that in pounds?" says which only with the line before it, "I have 200 euros
        left."); else the same one, its arguments written again with the error in view. After a second failure
        (the tool the first retry turned to), that tool once more. Written again, a call gives a value the error
        refused only among those on offer (``offered_again``)."""
        *before, name = _tried(request)
        same = next((t for t in request.tools if t.name == name), None)
        if before:  # the second retry: the tool the first one turned to, once more
            log.info("the local model's call of %s failed; it writes the call once more", name)
            return same
        said = " ".join([text for role, text in request.turns if role == "user"][-2:])  # the person's last lines
        close = overlap(said, described(same)) if same is not None else 0
        others = tuple(  # another action closer to the person's lines than the failed one (an output mends none)
            t for t in request.tools if t.name != name and not t.output and overlap(said, described(t)) > close
        )
        if others:
            again = replace(request, tools=others, turns=request.turns[:-2])
            route = (await self._helped(server, self._route_body(again))).strip()
            chosen = next((t for t in others if t.name == route), None)
            if chosen is not None:
                log.info("the local model's call of %s failed; it calls %s instead", name, chosen.name)
                return chosen
        if same is not None:
            log.info("the local model's call of %s failed; it writes the call once more", name)
        return same

    async def _collect(self, server: Any, body: dict[str, Any]) -> str:
        return "".join([text async for text in self._generate(server, body)])

    def _workers(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.slots + 2 * self.helpers + 2, thread_name_prefix="llama"
            )
        return self._executor

    async def _generate(self, server: Any, body: dict[str, Any]) -> AsyncGenerator[str, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stop = threading.Event()

        def on_chunk(chunk: Any) -> bool:
            """Called by llama.cpp for every chunk; returning True ends the generation."""
            if stop.is_set():
                return True
            try:
                loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except RuntimeError:  # the event loop is gone
                return True
            return False

        def generate() -> None:
            try:
                server.handle_chat_completions(body, on_chunk)
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(queue.put_nowait, None)

        worker = loop.run_in_executor(self._workers(), generate)
        try:
            while (chunk := await queue.get()) is not None:
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:
                    raise ModelError(self._describe(chunk["error"]))
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    content = delta.get("content")
                    if content:
                        yield content
                    for call in delta.get("tool_calls") or ():  # llama.cpp's own parser found a call
                        function = call.get("function") or {}
                        if function.get("name"):
                            yield f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(function["name"])}, "arguments": '
                        if function.get("arguments"):
                            yield str(function["arguments"])
                self._note_usage(chunk)
            try:
                await worker
            except Exception as exc:
                raise ModelError(f"the local model failed: {type(exc).__name__}: {exc}") from exc
        finally:
            stop.set()
            if not worker.done():
                done, _ = await asyncio.wait({worker}, timeout=_STOP_WAIT)
                if not done:
                    log.warning("the local model did not stop within %.0fs; it ends at its next token", _STOP_WAIT)
            if worker.done() and not worker.cancelled():
                worker.exception()  # retrieved: a failure after the caller left is not worth a warning

    def _note_usage(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.last_usage = ModelUsage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            if timings.get("predicted_per_second"):
                self.last_tokens_per_second = float(timings["predicted_per_second"])
            if "prompt_n" in timings:
                self.last_prompt_tokens = (int(timings.get("cache_n") or 0), int(timings["prompt_n"] or 0))
                log.debug(
                    "the local model: %d prompt tokens from the cache, %d evaluated in %.0f ms, %d written in %.0f ms",
                    *self.last_prompt_tokens,
                    float(timings.get("prompt_ms") or 0),
                    int(timings.get("predicted_n") or 0),
                    float(timings.get("predicted_ms") or 0),
                )

    def _describe(self, error: Any) -> str:
        if not isinstance(error, dict):
            return f"the local model failed: {error}"
        if error.get("type") == "exceed_context_size_error":
            return (
                f"the prompt ({error.get('n_prompt_tokens', '?')} tokens) does not fit the local model's context "
                f"of {error.get('n_ctx', self.context_size)} tokens: raise LLM_CONTEXT_SIZE or lower BOT_HISTORY"
            )
        return f"the local model failed: {error.get('message', error)}"


async def _once(text: str) -> AsyncIterator[str]:
    yield text


def _readable(result: str) -> str:
    """A tool's result as a small model reads it best: a JSON object as ``key: value`` pairs (it copies JSON into
    its answer as it is), a list of strings as words (``_listed``), an empty value as ``none`` (read as
    ``facts: []``, an empty list of what it remembers was answered with facts made up), anything else as it is."""
    try:
        data = json.loads(result)
    except ValueError:
        return result
    if not isinstance(data, dict):
        return result
    pairs = []
    for key, value in data.items():
        if value in ([], {}, None, ""):
            shown = "none"
        elif isinstance(value, str):
            shown = value
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            shown = _listed(value)
        else:
            shown = json.dumps(value, ensure_ascii=False)
        pairs.append(f"{key}: {shown}")
    return ", ".join(pairs) or "done"


def _listed(items: Sequence[str]) -> str:
    """Strings of a result's list as words, not JSON (``facts: ["Ana is your sister."]`` was copied into the
    answer, brackets and quotes): sentences one after the other, anything else with semicolons between."""
    if all(item.rstrip().endswith((".", "!", "?")) for item in items):
        return " ".join(item.strip() for item in items)
    return "; ".join(item.strip() for item in items)


def _without(messages: Sequence[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """``messages`` with ``part`` (a paragraph of the system message) left out of the system message."""
    return [
        {**m, "content": m["content"].replace(part, "").replace("\n\n\n\n", "\n\n").strip()}
        if m["role"] == "system"
        else m
        for m in messages
    ]


def _mended(later: Sequence[tuple[str, str]]) -> bool:
    """True when a call among the turns ``later`` than a failed one, before the next message, succeeded."""
    for role, text in later:
        if role in ("user", "assistant"):
            return False
        if role == "tool" and not _failed(text):
            return True
    return False


def _remarked(request: ModelRequest) -> bool:
    """Whether the user's last message, to a bot's own tools, has the form of a remark (``remark``): the decision
    names an action for some that ask for nothing ("I spent 37 dollars on lunch and 18 on a taxi." -> ``compute``,
    "I wrote a note about the recipe for lasagna." -> ``add_todo``), and it is asked about once more."""
    return not _assistants(request) and remark(request.turns[-1][1])


def _assistants(request: ModelRequest) -> bool:
    """True when the request offers tools of the built-in assistant (decided after examples of their own,
    ``ROUTE_EXAMPLES``), not only a bot author's."""
    return any(t.name in _ASSISTANT_TOOLS for t in request.tools)


_ASSISTANT_TOOLS = frozenset(name for _, name in ROUTE_EXAMPLES)


def _last_said(request: ModelRequest) -> str:
    """The person's last message."""
    return next((text for role, text in reversed(request.turns) if role == "user"), "")


def _tried(request: ModelRequest) -> list[str]:
    """The tools called for the user's last message, in order, when every one of them failed; else empty."""
    names: list[str] = []
    for role, text in reversed(request.turns):
        if role == "user":
            return names[::-1]
        if role == "tool_call":
            call = parse_tool_call(text)
            names.append(call.name if call is not None else "")
        elif role != "tool" or not _failed(text):
            return []
    return []


def _failed_call(request: ModelRequest) -> tuple[ToolCall, str] | None:
    """The call the request's last turns made and the error it failed with, if they are that."""
    if len(request.turns) < 2 or request.turns[-1][0] != "tool" or not _failed(request.turns[-1][1]):
        return None
    role, text = request.turns[-2]
    call = parse_tool_call(text) if role == "tool_call" else None
    return (call, request.turns[-1][1]) if call is not None else None


def _earlier(request: ModelRequest) -> str:
    """The person's line before their last message, on one line and cut to ``_EARLIER_CHARS``."""
    before = [text for role, text in request.turns[:-1] if role == "user"]
    return " ".join(before[-1].split())[:_EARLIER_CHARS] if before else ""


def _day_note(request: ModelRequest, *tools: ToolSpec) -> str:
    """The days the person's message and the line before it name, dated from the today the system prompt states
    (``day_table.day_note``), when one of ``tools`` takes a date; else empty."""
    today = today_in(request.system) if any(takes_date(t) for t in tools) else None
    said = [text for role, text in request.turns if role == "user"][-2:]
    return day_note("\n".join(said), today) if today is not None else ""


def _said(request: ModelRequest, tool: ToolSpec) -> str:
    """What the person's message and the line before it say, with the dates of the days they name."""
    said = [text for role, text in request.turns if role == "user"][-2:]
    return "\n".join([*said, _day_note(request, tool)])


def _gbnf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _in_own_words(output: ToolSpec) -> bool:
    """Whether ``output`` takes text alone (``text``, no attributes): the plain answer is its content. Asked to
    write it as a call, the model copied the first sentence of the context's instructions ("Show me my todo
    list." -> ``todo:list`` "Today is Wednesday."); answering plainly, it writes from the state it is shown."""
    properties = output.parameters.get("properties") if isinstance(output.parameters, dict) else None
    return output.output == "text" and isinstance(properties, dict) and set(properties) == {"text"}


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the chat template lists it (OpenAI's function format)."""
    parameters = tool.parameters or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


def _after_tool(request: ModelRequest) -> bool:
    """A plain request whose last turn is the result of a tool that succeeded."""
    return (
        request.plain and bool(request.turns) and request.turns[-1][0] == "tool" and not _failed(request.turns[-1][1])
    )


def _failed(result: str) -> bool:
    return result.startswith("error:")


async def _guarded(chunks: AsyncIterator[str], request: ModelRequest) -> AsyncGenerator[str, None]:
    """A plain answer as it streams, mended (``answer_guards``): to a message about the bot, no sentence claims a
    maker the persona does not name. (After a tool that failed, the model may answer with regrets.)"""
    last = request.turns[-1] if request.turns else ("user", request.prompt)
    if last[0] != "user" or not about_itself(last[1]):
        async for chunk in chunks:
            yield chunk
        return
    guard = IdentityGuard(request.system.split("\n\n")[0])
    async for chunk in chunks:
        text = guard.feed(chunk)
        if text:
            yield text
    yield guard.close()


async def _tool_or_text(chunks: AsyncIterator[str], tools: Sequence[ToolSpec]) -> AsyncGenerator[str, None]:
    """The reply as it streams, or, when the model wrote a call of one of ``tools`` (its first character is ``<`` or
    ``{``, which a reply cannot start with), the whole call once it is complete: an action call, or the output
    itself when the tool is an output."""
    head = ""
    calling: bool | None = None
    async for chunk in chunks:
        if calling is None:
            head += chunk
            if not head.strip():
                continue
            calling = head.lstrip()[0] in "<{`"
            if not calling:
                yield head
            continue
        if calling:
            head += chunk
        else:
            yield chunk
    if not calling:
        return
    call = parse_tool_call(head)
    if call is None:  # cut by max_tokens: nothing usable
        log.warning("the local model wrote an incomplete tool call (%d characters); no answer", len(head))
        yield "<response></response>"
        return
    tool = next((t for t in tools if t.name == call.name), None)
    yield call.as_output(tool.output) if tool is not None and tool.output else call.as_action_call()
