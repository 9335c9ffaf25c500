"""A numbered command argument is ASCII digits (issue 49, point 6), through the real python-telegram-bot client and
the fake Bot API: ``/memory delete ²`` (which ``str.isdigit`` accepts and ``int`` refuses) and other digits that are
not ASCII get the clean answer for a number that is not on the list, never an error, and delete nothing."""

from __future__ import annotations

import pytest

from core.facts import Fact, Facts
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot

ANN = 2001


@pytest.mark.parametrize("number", ["²", "٣", "１", "1²", "99999999999999999999"])
async def test_memory_delete_with_a_number_that_is_not_ascii_digits_answers_cleanly(
    server: FakeTelegramServer, start_bot: StartBot, number: str
) -> None:
    facts = Facts()
    await start_bot(["ok"], agent_options={"plugins": [facts]})
    fact = Fact(conversation=f"telegram:chat:{ANN}", text="Ann likes tea", owner=f"telegram:{ANN}")
    await facts.store.add(fact, limit=50)
    server.user_says(f"/memory delete {number}", user_id=ANN, first_name="Ann")
    [answer] = await server.wait_replies(1, chat_id=ANN)
    assert answer.text.startswith("There is no item ") and answer.text.endswith(
        "/memory lists them with their numbers."
    )
    assert [f.text for f in await facts.store.of_owner(f"telegram:{ANN}")] == ["Ann likes tea"]
