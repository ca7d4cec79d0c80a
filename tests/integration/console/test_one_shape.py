"""A dead letter, an event and a held key are one JSON document whoever reads them: on
one database, what `gateway dlq list/show --json`, `gateway events list/show --json`
and `gateway ordering keys --json` print for a row is what the console's API answers
an investigator (who reads payloads, as the CLI does) for the same row.

Both sides read one frozen clock, so the ages (`age_s`, `held_for_s`) are equal too. The
`show` documents differ only by what each reader adds beside the row's fields: the CLI
its stored headers and payload, decoded; the API's event detail its gathered blocks and
a masked view. The CLI runs through its own entry point in this process, as
tests/integration/console/test_cli_agrees.py runs it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from gateway import cli
from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import park

#: Beside the row's fields, `dlq show --json` and `events show --json` print these.
CLI_ONLY = {"headers", "payload_format", "payload"}
#: Beside the event's fields, the API's detail answers these (its own `headers` and
#: `payload`: a masked view).
EVENT_API_ONLY = {"key", "settlement", "dead_letters", "headers", "payload"}


class _Frozen(datetime):
    """`datetime` whose `now` is the test's instant, for the CLI commands' clock."""

    at: datetime

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return cls.at if tz is None else cls.at.astimezone(tz)


@pytest.fixture
def now(console: ConsoleHarness, monkeypatch: pytest.MonkeyPatch) -> datetime:
    """One instant for both readers: an hour ahead, so the rows written with the
    database's now() are in the API's default event window and have an age."""
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    _Frozen.at = at
    monkeypatch.setattr(console.deps, "now", lambda: at)
    monkeypatch.setattr("gateway.cli.dlq.datetime", _Frozen)
    monkeypatch.setattr("gateway.cli.ordering.datetime", _Frozen)
    return at


async def seed(console: ConsoleHarness) -> tuple[int, int]:
    """A settlement dead letter holding its key (stripe pi_9 at 3, 5 given), with its
    event's row; (the dead letter's id, the event's row id)."""
    async with console.pool.acquire() as conn:
        dlq_id = await park(
            conn,
            "evt_one_shape",
            error_message="no ledger account for merchant acct_9",
            attempts=2,
            order_key="pi_9",
            key_seq=3,
        )
        event_id: int = await conn.fetchval(
            "SELECT webhook_id FROM dlq_webhooks WHERE id = $1", dlq_id
        )
        await conn.execute(
            "INSERT INTO order_counters (provider, order_key, last_seq)"
            " VALUES ('stripe', 'pi_9', 5)"
        )
        await conn.execute(
            "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq,"
            " held_dlq_id, hold_reason, held_at)"
            " VALUES ('stripe', 'pi_9', 2, 3, $1, 'UNKNOWN_MERCHANT', now() - interval '20 min')",
            dlq_id,
        )
    return dlq_id, event_id


async def printed(capsys: pytest.CaptureFixture[str], cfg: str, *argv: str) -> Any:
    """What `gateway ARGV --json --config CFG` prints, parsed."""
    args = [*argv, "--json", "--config", cfg]
    status = await asyncio.to_thread(cli.main, args)
    captured = capsys.readouterr()
    assert status == 0, (args, captured.err)
    return orjson.loads(captured.out)


async def answered(console: ConsoleHarness, path: str, **params: str) -> Any:
    r = await console.client(Role.INVESTIGATOR).get(f"/console/api/v1{path}", params=params)
    assert r.status_code == 200, (path, r.text)
    return r.json()


def without(doc: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in keys}


async def test_the_cli_prints_what_the_api_answers(
    console: ConsoleHarness, cfg: str, now: datetime, capsys: pytest.CaptureFixture[str]
) -> None:
    dlq_id, event_id = await seed(console)

    # A dead letter: the list item whole, and the row's fields of `show`.
    (listed,) = await printed(capsys, cfg, "dlq", "list")
    (item,) = (await answered(console, "/dlq"))["items"]
    assert listed == item
    assert listed["error_message"] == "no ledger account for merchant acct_9"
    assert listed["age_s"] == pytest.approx(3600, abs=5)
    shown = await printed(capsys, cfg, "dlq", "show", str(dlq_id))
    detail = await answered(console, f"/dlq/{dlq_id}")
    assert set(shown) - set(detail) == CLI_ONLY
    assert without(shown, CLI_ONLY) == detail
    assert detail["error_detail"] and detail["auto_replays"] == 0

    # An event: the list item whole, and the event's own fields of `show`.
    (listed,) = await printed(capsys, cfg, "events", "list", "--id", str(event_id))
    (item,) = (await answered(console, "/events", id=str(event_id)))["items"]
    assert listed == item
    shown = await printed(capsys, cfg, "events", "show", str(event_id))
    detail = await answered(console, f"/events/{event_id}")
    assert without(shown, CLI_ONLY) == without(detail, EVENT_API_ONLY)
    assert set(shown) - CLI_ONLY == set(detail) - EVENT_API_ONLY
    assert shown["order_key"] == "pi_9" and shown["trace_id"] is not None

    # A held key.
    (listed,) = await printed(capsys, cfg, "ordering", "keys", "--held")
    (item,) = (await answered(console, "/keys"))["items"]
    assert listed == item
    assert (listed["held_dlq_id"], listed["blocked"]) == (dlq_id, 2)
    assert listed["held_for_s"] == pytest.approx(80 * 60, abs=5)
    assert listed["held_at"].endswith("Z")
