"""``REDIS_SENTINELS``: every entry is host:port (an IPv6 host in brackets), anything else is one line naming the
variable, and an entry holding a password (a URL, credentials) is refused without being repeated."""

from __future__ import annotations

import pytest

from bots.config import load_settings
from bots.queue_settings import parse_sentinels
from core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("settings_env")  # no setting from this machine, no .env but the test's own


def problem(monkeypatch: pytest.MonkeyPatch, value: str) -> str:
    monkeypatch.setenv("REDIS_SENTINELS", value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    [line] = str(exc.value).splitlines()[1:]
    return line.strip()


def test_the_forms_written_in_the_deploy_files_are_read() -> None:
    assert parse_sentinels("sentinel-1:26379, sentinel-2:26380;sentinel-3") == (
        ("sentinel-1", 26379),
        ("sentinel-2", 26380),
        ("sentinel-3", 26379),
    )
    assert parse_sentinels("[::1]:26380,[fe80::1]") == (("::1", 26380), ("fe80::1", 26379))


@pytest.mark.parametrize(
    "value",
    [
        "::1:26379",  # an IPv6 host without brackets: was read as the host "::1:26379"
        "[::1",  # an unclosed bracket: was read as the host "::1"
        "[::1]26379",
        "sentinel-1 sentinel-2",  # a space, not a comma: was one host "sentinel-1 sentinel-2"
        "sentinel-1:26379:26380",
        "sentinel-1:0",
        "sentinel-1:65536",
        "sentinel-1:²",  # a digit to isdigit(), not to int()
        ":26379",
    ],
)
def test_an_entry_that_is_not_host_port_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    line = problem(monkeypatch, value)
    assert line.startswith(f"REDIS_SENTINELS: {value!r} is not host:port; write for example sentinel-1:26379"), line


@pytest.mark.parametrize(
    "value", ["redis://:hunter2-secret@sentinel-1:26379", "user:hunter2-secret@sentinel-1:26379", "s1,//hunter2-secret"]
)
def test_an_entry_with_a_password_is_refused_without_repeating_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    line = problem(monkeypatch, value)
    assert line.startswith("REDIS_SENTINELS: an entry is a URL or holds credentials"), line
    assert "REDIS_SENTINEL_PASSWORD" in line
    assert "hunter2" not in line


def test_separators_only_name_no_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_SENTINELS", " , ; ")
    assert load_settings().redis.sentinels == ""  # not ",", which bots config then reported as no sentinel answering
