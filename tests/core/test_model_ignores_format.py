"""A model that ignores the response format is a model failure (issue 47, operators): its plain text, outside any
tag, is read back to it as an error at each step; a run that ends with nothing delivered that way tells the person
the model failed (instead of silence), reports ``model_format_failed:<model>`` (``bots_model_format_failed_total``,
the alert BotsModelIgnoresFormat) and an error event, so the run counts as failed and not as a message ignored."""

from __future__ import annotations

from core import RunEvent, RunEventType, ScriptedModel, create_agent
from core.engine import FORMAT_FAILED_NOTICE
from core.testing import StandInChat


async def test_a_model_that_ignores_the_response_format_is_a_model_failure_the_person_is_told_of() -> None:
    chat = StandInChat()
    model = ScriptedModel(["Hello! I am a helpful assistant."], repeat_last=True)  # never a tag
    agent = create_agent(model=model, extensions=[chat.extension])
    seen: list[tuple[str, str]] = []
    events: list[RunEvent] = []
    agent.add_observer(lambda kind, cid, value: seen.append((kind, cid)))
    agent.add_event_listener(events.append)
    async with agent:
        await chat.says(agent, "hi")
    assert chat.texts() == [FORMAT_FAILED_NOTICE]
    assert [k for k, _ in seen if k.startswith("model_format_failed:")] == [
        f"model_format_failed:{model.model or model.name}"
    ]
    assert [e.content for e in events if e.type is RunEventType.ERROR] == [
        "the model's answer did not follow the response format"
    ]


async def test_a_model_that_answers_in_the_format_after_being_told_is_no_failure() -> None:
    chat = StandInChat()
    model = ScriptedModel(["Hello in plain text.", '<response><output type="test:message">Hello!</output></response>'])
    agent = create_agent(model=model, extensions=[chat.extension])
    seen: list[str] = []
    agent.add_observer(lambda kind, cid, value: seen.append(kind))
    async with agent:
        await chat.says(agent, "hi")
    assert chat.texts() == ["Hello!"]
    assert not [k for k in seen if k.startswith("model_format_failed")]


def test_the_metric_counts_the_model() -> None:
    from bots import metrics

    before = metrics.MODEL_FORMAT_FAILED.labels(model="tiny")._value.get()
    metrics.observe("model_format_failed:tiny", "telegram:1")
    assert metrics.MODEL_FORMAT_FAILED.labels(model="tiny")._value.get() == before + 1
