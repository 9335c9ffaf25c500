"""What a run reads from the agent is built once and again after the model changed."""

from __future__ import annotations

from core import InMemoryStore, ScriptedModel, context, create_agent, output


def test_run_deps_are_shared_until_the_model_changes() -> None:
    chat = context(type="chat", schema=str, key=lambda s: s)
    agent = create_agent(
        model=ScriptedModel(["<response></response>"]),
        contexts=[chat],
        outputs=[output(type="m")],
        memory=InMemoryStore(),
    )
    first = agent.run_deps()
    assert agent.run_deps() is first
    changed = first
    agent.model.vision = True  # the model's own setting: the deps say the run shows images from now on
    assert agent.run_deps().sees_images is not changed.sees_images
    other = ScriptedModel(["<response></response>"])
    agent.model = other
    assert agent.run_deps().model is other
