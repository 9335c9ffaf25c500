"""/metrics exports usage totals by model (never by user) and /stats-style counters add up per user and chat."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bots.ops import Ops, serve
from core import Price
from core.usage import USAGE, day_of
from extensions.terminal import cli_session

from .support import REPLY, CountingModel, make_agent, sample
from .test_endpoints import get


async def test_usage_by_model_reaches_metrics_without_user_ids() -> None:
    ops = Ops()
    model = CountingModel([REPLY], usage=(100, 7))
    agent = make_agent(model, prices={"scripted": Price(input=2.0, output=10.0)})
    ops.attach(agent)
    tokens_in = sample("bots_usage_tokens_total", {"model": "scripted", "direction": "input"})
    cost = sample("bots_usage_cost_dollars_total", {"model": "scripted"})
    async with aiohttp.ClientSession() as http, agent, serve(ops, host="127.0.0.1", port=0) as port:
        await agent.send(cli_session, "ops", {"type": "cli:message", "data": "hello"})
        status, _, text = await get(http, port, "/metrics")
    assert status == 200
    assert sample("bots_usage_tokens_total", {"model": "scripted", "direction": "input"}) == tokens_in + 100
    assert abs(sample("bots_usage_cost_dollars_total", {"model": "scripted"}) - cost - 0.00027) < 1e-9
    for family in text_string_to_metric_families(text):
        if family.name.startswith("bots_usage"):
            assert all(set(s.labels) <= {"model", "direction"} for s in family.samples)
    chat = await agent.provided(USAGE).totals("chat:cli:session:ops", [day_of()])
    assert (chat.input_tokens, chat.output_tokens, chat.cost_micros) == (100, 7, 270)
