"""XML arguments (``action(call_format="xml")``): elements read into the shape the action's schema declares."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from core import ActionResult, ValidationError, action, context
from core.call_format import xml_arguments
from core.prompt import format_action
from core.schema import as_schema

from ..framework.kit import R, bot, msg


class Place(BaseModel):
    city: str
    country: str | None = None


class Trip(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    title: str
    days: int
    nights: int | None = None
    go: bool
    stops: list[Place]
    tags: list[str] = []
    home: Place | None = None
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


def read(text: str, tp: Any = Trip) -> Any:
    return xml_arguments("trip", text, as_schema(tp, what="test"))


def test_each_element_is_an_argument_shaped_by_the_schema() -> None:
    args = read(
        "<title> 42 <b>days</b> </title><days>3</days><nights></nights><go>true</go>"
        "<stops><city>Paris</city></stops><stops><city>Rome</city><country>IT</country></stops>"
        "<tags><item>a</item><item>b</item></tags><home><city>Lyon</city></home><_outputPath>†trip</_outputPath>"
    )
    assert args == {
        "title": "42 <b>days</b>",
        "days": 3,
        "nights": None,
        "go": True,
        "stops": [{"city": "Paris"}, {"city": "Rome", "country": "IT"}],
        "tags": ["a", "b"],
        "home": {"city": "Lyon"},
        "_outputPath": "†trip",
    }
    assert Trip.model_validate(args).stops[1].country == "IT"


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("<tags>solo</tags>", ["solo"]),
        ('<tags>["x", "y"]</tags>', ["x", "y"]),
        ("<tags>a</tags><tags>b</tags>", ["a", "b"]),
    ],
)
def test_a_list_is_a_repeated_element_item_elements_or_json(text: str, tags: list[str]) -> None:
    assert read(text)["tags"] == tags


def test_it_is_forgiving() -> None:
    assert read("") == {}
    assert read('{"days": 2}') == {"days": 2}
    assert read("note <days>2</days> more <title>left open") == {"days": 2, "title": "left open"}
    assert read("<x/><y>1</y>", dict[str, Any]) == {"x": "", "y": 1}
    with pytest.raises(ValidationError, match="<name>value</name>"):
        read("just text")


def test_the_prompt_tells_the_model_how_to_write_them() -> None:
    xml = action(name="trip", schema=Trip, call_format="xml", handler=lambda args, ctx, agent: None)
    assert "<call_format>xml: write the arguments as XML elements" in format_action(xml)
    assert "<call_format>" not in format_action(action(name="j", handler=lambda args, ctx, agent: None))


async def test_an_xml_call_runs_and_writes_its_output_path() -> None:
    plan = action(
        name="plan",
        schema=Trip,
        call_format="xml",
        handler=lambda args, ctx, agent: f"{args.days} days, {len(args.stops)} stops",
    )
    show = action(name="show", schema=dict[str, Any], handler=lambda args, ctx, agent: args["value"])
    chat = context(type="trip", schema=str)
    agent, _ = bot(
        [
            R(
                '<action_call name="show">{"value": "†trip"}</action_call>'
                '<action_call name="plan"><title>T</title><days>2</days><go>yes</go>'
                "<stops><city>Oslo</city></stops><_outputPath>†trip</_outputPath></action_call>"
            ),
            R(""),
        ],
        actions=(plan, show),
        contexts=(chat,),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("plan it"))
    results = {c.name: (c.data, c.error) for c in chain if isinstance(c, ActionResult)}
    assert results == {"plan": ("2 days, 1 stops", None), "show": ("2 days, 1 stops", None)}


def test_call_format_is_json_or_xml() -> None:
    from core import DefinitionError

    with pytest.raises(DefinitionError, match="call_format"):
        action(name="x", call_format="yaml", handler=lambda args, ctx, agent: None)  # type: ignore[arg-type]
