"""The operations endpoints of a process: ``/healthz``, ``/readyz`` and ``/metrics`` on ``HTTP_PORT``, and the
webhooks of ``core.webhooks`` at ``POST /hooks/<name>`` where a bot takes them (``WEBHOOKS_ENABLED``).

``bots run``, ``bots gateway`` and ``bots worker`` serve them with ``serve(ops, ...)``; ``ops`` is this
process's registry. What makes a process ready:

- every agent given to ``ops.attach(agent)`` answers (its ``start()`` has finished, so the embedded model is
  loaded and the platforms listen, and ``stop()`` has not begun, and no service
  reported a fatal error with ``agent.fail``), its model is reachable (``model_check``) and every check in
  its ``agent.readiness_checks`` passes: the chat adapters register theirs with ``agent.add_readiness`` at
  start (``discord``: the gateway is connected and ready; ``telegram``: updates arrive by polling or webhook);
- every check added with ``ops.add_check(name, check)`` passes (the queue adds ``redis``).

``/readyz`` also shows ``info`` entries added with ``ops.add_info`` (a gateway's Discord shards).

A check is a callable returning, or awaiting to, ``True``/``None`` (ready), ``False`` or a reason string
(not ready); raising counts as not ready; a ``core.Degraded`` reason is shown while the process stays
ready (an MCP server is down: its tools are hidden, the bot still answers).
Each gets ``HTTP_CHECK_TIMEOUT`` seconds. After ``ops.stopping()``
(SIGTERM) ``/readyz`` answers 503 so load balancers stop sending work, while ``/healthz`` stays 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition

from core.errors import cannot_listen
from core.health import Degraded
from core.models import FallbackModel
from core.models.base import HoldsWeights, SelfChecking, ServedOverHttp

from .metrics import RunTracker

if TYPE_CHECKING:
    from aiohttp import web

    from core import Setup
    from core.webhooks import Webhooks
    from extensions.chat.http_server import HttpLimits

__all__ = ("CheckResult", "Ops", "model_check", "ops", "serve")

log = logging.getLogger("bots.ops")

Check = Callable[[], Any]
"""``() -> bool | str | None`` or its awaitable: see the module docstring."""

Sampler = Callable[[], Awaitable[None]]
"""Refreshes gauges (queue depth) right before ``/metrics`` is rendered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """The outcome of one readiness check."""

    name: str
    """The check's name (``agent``, ``model``, ``redis``, ``discord``)."""
    ok: bool
    """True when ready."""
    detail: str
    """``ok`` or why not."""


class Ops:
    """What one process reports on its HTTP port."""

    def __init__(self, *, check_timeout: float = 2.0, registry: CollectorRegistry = REGISTRY) -> None:
        self.check_timeout = check_timeout
        """Seconds each readiness check may take (``HTTP_CHECK_TIMEOUT``)."""
        self.registry = registry
        """What ``/metrics`` renders."""
        self.checks: dict[str, Check] = {}
        """Process-wide readiness checks by name."""
        self.samplers: dict[str, Sampler] = {}
        """Gauge refreshers run before ``/metrics`` renders."""
        self.agents: list[Setup] = []
        """Agents whose state, model and readiness checks count."""
        self.info: dict[str, Callable[[], Any]] = {}
        """What ``/readyz`` shows besides the checks, by name (``discord_shards``: the shards this process holds)."""
        self.started = time.monotonic()
        self._stopping = False
        self._model_checks: dict[int, Check] = {}
        self.webhooks: list[Webhooks] = []
        """The bots' webhook sources served at ``POST /hooks/<name>`` (``core.webhooks``)."""

    # -- registration ----------------------------------------------------------------------------------

    def add_check(self, name: str, check: Check) -> None:
        """Add (or replace) a process-wide readiness check."""
        self.checks[name] = check

    def remove_check(self, name: str) -> None:
        """Drop a check; a missing one is fine."""
        self.checks.pop(name, None)

    def add_info(self, name: str, info: Callable[[], Any]) -> None:
        """Show ``info()`` (JSON) under ``info.<name>`` in ``/readyz``; ``remove_info`` takes it away."""
        self.info[name] = info

    def remove_info(self, name: str) -> None:
        """Stop showing an info entry; a missing one is fine."""
        self.info.pop(name, None)

    def add_sampler(self, name: str, sampler: Sampler) -> None:
        """Add (or replace) a gauge refresher, such as one reading the queue depth from Redis."""
        self.samplers[name] = sampler

    def attach(self, agent: Setup, *, check_model: bool = True) -> None:
        """Count ``agent``'s runs, model calls, replies and tokens, and make its readiness this process's."""
        if any(a is agent for a in self.agents):
            return
        RunTracker().install(agent)
        self.agents.append(agent)
        if check_model:
            self._model_checks[id(agent)] = model_check(agent.model)

    def detach(self, agent: Setup) -> None:
        """Stop counting ``agent`` in readiness (its metrics hooks stay)."""
        self.agents = [a for a in self.agents if a is not agent]
        self._model_checks.pop(id(agent), None)

    def add_webhooks(self, hooks: Webhooks) -> None:
        """Serve ``hooks``' sources at ``POST /hooks/<name>`` (an agent that starts)."""
        if all(h is not hooks for h in self.webhooks):
            self.webhooks.append(hooks)

    def remove_webhooks(self, hooks: Webhooks) -> None:
        """Stop serving ``hooks`` (its agent stops)."""
        self.webhooks = [h for h in self.webhooks if h is not hooks]

    def stopping(self) -> None:
        """The process is shutting down: ``/readyz`` answers 503 from now on."""
        self._stopping = True

    @property
    def is_stopping(self) -> bool:
        """True once ``stopping()`` was called."""
        return self._stopping

    # -- checks ----------------------------------------------------------------------------------------

    def _all_checks(self) -> dict[str, Check]:
        checks: dict[str, Check] = {}
        for index, agent in enumerate(self.agents):  # a gateway runs one agent per platform
            checks["agent" if index == 0 else f"agent:{index + 1}"] = _agent_running(agent)
            model = self._model_checks.get(id(agent))
            if model is not None:
                checks["model"] = model
            checks.update(agent.readiness_checks)
        checks.update(self.checks)
        return checks

    async def readiness(self) -> tuple[bool, list[CheckResult]]:
        """Run every check at once, each within ``check_timeout``; ``(ready, results)``."""
        if self._stopping:
            return False, [CheckResult(name="process", ok=False, detail="stopping")]
        checks = self._all_checks()
        if not checks:  # nothing attached yet: the process is still building its parts
            return False, [CheckResult(name="process", ok=False, detail="starting")]
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._run_check(name, check)) for name, check in checks.items()]
        results = [t.result() for t in tasks]
        return all(r.ok for r in results), results

    async def _run_check(self, name: str, check: Check) -> CheckResult:
        try:
            async with asyncio.timeout(self.check_timeout):
                outcome = check()
                if inspect.isawaitable(outcome):
                    outcome = await outcome
        except TimeoutError:
            return CheckResult(name=name, ok=False, detail=f"no answer within {self.check_timeout:g}s")
        except Exception as exc:
            return CheckResult(name=name, ok=False, detail=f"{type(exc).__name__}: {exc}"[:200])
        if outcome is None or outcome is True:
            return CheckResult(name=name, ok=True, detail="ok")
        if isinstance(outcome, Degraded):
            return CheckResult(name=name, ok=True, detail=f"degraded: {outcome}"[:200])
        if outcome is False:
            return CheckResult(name=name, ok=False, detail="not ready")
        return CheckResult(name=name, ok=False, detail=str(outcome)[:200])

    async def render_metrics(self, *, openmetrics: bool = False) -> bytes:
        """Refresh the sampled gauges, then render every metric in the text format (``openmetrics``: the
        OpenMetrics format, with the reply-time histograms' exemplars pointing at traces)."""
        for name, sampler in list(self.samplers.items()):
            try:
                async with asyncio.timeout(self.check_timeout):
                    await sampler()
            except Exception as exc:
                log.warning("metrics sampler %s failed: %s", name, exc)
        if openmetrics:
            text: bytes = exposition.generate_latest(self.registry)  # type: ignore[no-untyped-call]
            return text
        return generate_latest(self.registry)

    # -- HTTP ------------------------------------------------------------------------------------------

    def application(self) -> web.Application:
        """The aiohttp application with the three endpoints."""
        from aiohttp import web  # (here: a process with HTTP_PORT=0 never loads the web server)

        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/hooks/{name}", self._hook)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response({"status": "ok", "uptime_seconds": round(time.monotonic() - self.started, 3)})

    async def _readyz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        ready, results = await self.readiness()
        body: dict[str, Any] = {"ready": ready, "checks": {r.name: r.detail for r in results}}
        if self.info:
            body["info"] = {name: info() for name, info in self.info.items()}
        return web.json_response(body, status=200 if ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        from aiohttp import web

        if "application/openmetrics-text" in request.headers.get("Accept", ""):  # with exemplars (trace ids)
            body = await self.render_metrics(openmetrics=True)
            return web.Response(body=body, headers={"Content-Type": exposition.CONTENT_TYPE_LATEST})
        body = await self.render_metrics()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _hook(self, request: web.Request) -> web.Response:
        from aiohttp import web

        name = request.match_info["name"]
        found = [(h, h.limit(name)) for h in self.webhooks]
        hooks, limit = next(((h, n) for h, n in found if n is not None), (None, None))
        if hooks is None or limit is None:
            if not self.webhooks or self._stopping:
                return web.json_response(
                    {"status": "refused", "reason": "this process takes no webhooks now"}, status=503
                )
            return web.json_response({"status": "refused", "reason": "no webhook source of that name"}, status=404)
        body: bytes | None = None  # (None: larger than the source takes; the server read it within client_max_size)
        if request.content_length is None or request.content_length <= limit:
            body = await request.read()
        verdict = await hooks.receive(name, request.headers, body)
        headers = {"Retry-After": str(verdict.retry_after)} if verdict.retry_after else None
        status = "queued" if verdict.status == 202 else "refused"
        return web.json_response({"status": status, "reason": verdict.reason}, status=verdict.status, headers=headers)


def _agent_running(agent: Setup) -> Check:
    def check() -> bool | str:
        if agent.failure is not None:
            return f"failed: {agent.failure}"
        if agent.running and not agent.started:  # its services start: the embedded model loads, platforms connect
            return "starting: the model and the platforms are not ready yet"
        return True if agent.started else "not running (starting or stopping)"

    return check


def model_check(model: Any, *, cache_seconds: float = 10.0) -> Check:
    """Is the model reachable? A model's own ``ready()`` when it has one; the embedded model is ready once
    its weights are loaded or loadable; an HTTP model is when its server answers ``GET <base_url>/models``
    (any HTTP status: 401 still proves the server is there; no key is sent). The answer is kept for
    ``cache_seconds`` so probes do not hammer the provider. A chain of models (``LLM_FALLBACKS``) is ready while
    one of them is."""
    if isinstance(model, FallbackModel):
        return _chain_check(model, cache_seconds)
    if isinstance(model, SelfChecking):
        return model.ready
    if isinstance(model, HoldsWeights):
        weights = model

        def local() -> bool | str:
            if weights.loaded or weights.model_path.is_file():
                return True
            return f"model file {weights.model_path} is missing: check LLM_MODEL_PATH"

        return local
    if not isinstance(model, ServedOverHttp) or not model.base_url:
        return lambda: True
    url = model.base_url.rstrip("/") + "/models"
    cached: list[tuple[float, bool | str]] = []

    async def remote() -> bool | str:
        from aiohttp import ClientError, ClientSession, ClientTimeout

        now = time.monotonic()
        if cached and now - cached[0][0] < cache_seconds:
            return cached[0][1]
        outcome: bool | str
        try:
            async with (
                ClientSession(timeout=ClientTimeout(total=cache_seconds)) as session,
                session.get(url, allow_redirects=False) as response,
            ):
                status = response.status
            outcome = True if status < 500 else f"the model server answered HTTP {status}"
        except (ClientError, OSError) as exc:
            outcome = f"cannot reach the model server ({type(exc).__name__}): check LLM_BASE_URL"
        cached[:] = [(now, outcome)]
        return outcome

    return remote


def _chain_check(chain: FallbackModel, cache_seconds: float) -> Check:
    """Ready when the first model of the chain is; degraded (still ready) when a later one must answer for it or a
    model is paused by its circuit breaker; not ready when none can answer."""
    checks = [(member.name, model_check(member, cache_seconds=cache_seconds)) for member in chain.models]

    async def any_ready() -> bool | str:
        reasons = [
            f"{member.name} paused for {breaker.reopens_in():.0f}s after repeated failures"
            for member, breaker in zip(chain.models, chain.breakers, strict=True)
            if breaker.reopens_in() > 0
        ]
        for name, check in checks:
            try:
                outcome = check()
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            except Exception as exc:  # a failing check is a model that cannot answer
                outcome = f"{type(exc).__name__}: {exc}"
            if outcome is True or outcome is None or isinstance(outcome, Degraded):
                return Degraded("; ".join(reasons)) if reasons else True
            reasons.append(f"{name}: {outcome or 'not ready'}")
        return "no model of the LLM_FALLBACKS chain can answer: " + "; ".join(reasons)

    return any_ready


@contextlib.asynccontextmanager
async def serve(ops: Ops, *, host: str, port: int, limits: HttpLimits | None = None) -> AsyncIterator[int]:
    """Serve ``ops`` on ``host:port`` while the block runs, within ``limits`` (a half-sent request dropped, the
    connections capped; ``extensions.chat.http_server.DEFAULT_LIMITS`` when None); yields the bound port
    (``port=0`` picks one)."""
    from extensions.chat.http_server import DEFAULT_LIMITS, start_site

    limits = DEFAULT_LIMITS if limits is None else limits
    try:
        runner, bound = await start_site(ops.application(), host, port, limits=limits)
    except OSError as exc:
        raise cannot_listen(exc, host_var="HTTP_HOST", host=host, port_var="HTTP_PORT", port=port) from exc
    try:
        log.info("health and metrics on http://%s:%d (/healthz, /readyz, /metrics)", host, bound)
        yield bound
    finally:
        await runner.cleanup()


ops = Ops()
"""This process's registry, used by ``bots run``, ``bots gateway`` and ``bots worker``."""
