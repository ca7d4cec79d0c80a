"""The pure parts of GoCardless's event listing for backfill: the query a page sends,
what makes an answer the listing, and each listed event recorded as the webhook's row
is, so that the gate reads the same id and type from both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from gateway.adapters.provider_api.gocardless_events import (
    HEADERS,
    PAGE_LIMIT,
    api_time,
    event_type,
    list_params,
    listed_event,
    listed_events,
    listed_page,
    type_params,
)
from gateway.core.backfill.decisions import Window
from gateway.core.events.model import webhook_event
from gateway.core.providers.gocardless.webhooks import ITEM_BYTES_MAX, ITEMS_MAX
from gateway.core.signatures.base import SchemeParams
from gateway.core.signatures.gocardless import SCHEME, split
from gateway.errors import ProviderApiAnswerInvalid

NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def event(n: int, resource: str = "payments", action: str = "confirmed") -> dict[str, Any]:
    return {"id": f"EV{n:012d}", "created_at": "2026-12-06T10:00:00.123Z",
            "resource_type": resource, "action": action, "links": {"payment": "PM0001"},
            "details": {"origin": "bank", "cause": "payment_confirmed",
                        "description": "Zahlung bestätigt ✓"},
            "metadata": {}}  # fmt: skip


@pytest.mark.parametrize(
    ("when", "up", "written"),
    [
        (datetime(2026, 12, 6, 10, 0, tzinfo=UTC), False, "2026-12-06T10:00:00.000Z"),
        (datetime(2026, 12, 6, 10, 0, tzinfo=UTC), True, "2026-12-06T10:00:00.000Z"),
        # a start rounds down, an exclusive end up: no listed millisecond is left out
        (datetime(2026, 12, 6, 10, 0, 0, 123456, tzinfo=UTC), False, "2026-12-06T10:00:00.123Z"),
        (datetime(2026, 12, 6, 10, 0, 0, 123456, tzinfo=UTC), True, "2026-12-06T10:00:00.124Z"),
        (datetime(2026, 12, 6, 23, 59, 59, 999001, tzinfo=UTC), True, "2026-12-07T00:00:00.000Z"),
        # any zone is written in UTC
        (datetime(2026, 12, 6, 11, 0, tzinfo=timezone(timedelta(hours=1))), False,
         "2026-12-06T10:00:00.000Z"),
    ],
)  # fmt: skip
def test_times_are_written_in_utc_milliseconds(when: datetime, up: bool, written: str) -> None:
    """GoCardless's times have milliseconds: the window is widened to whole ones."""
    assert api_time(when, up=up) == written


@pytest.mark.parametrize(
    ("types", "params"),
    [
        ((), []),
        (("payments.confirmed",), [("resource_type", "payments"), ("action", "confirmed")]),
        (("payments.confirmed", "payments.failed"), [("resource_type", "payments")]),
        (("payments.confirmed", "refunds.created"), []),  # one value each: filtered here
        (("confirmed",), []),  # not a GoCardless type: the run's own filter refuses it
        ((".confirmed",), []),
    ],
)
def test_the_type_filter_goes_to_the_api_when_one_value_says_it(
    types: tuple[str, ...], params: list[tuple[str, str]]
) -> None:
    assert type_params(types) == params


def test_a_page_asks_for_the_window_the_largest_page_and_the_cursor() -> None:
    window = Window(NOW - timedelta(hours=1), NOW, ("mandates.created",))
    assert list(list_params(window, "EV000000000007")) == [
        ("created_at[gte]", "2026-12-06T09:00:00.000Z"),
        ("created_at[lt]", "2026-12-06T10:00:00.000Z"),
        ("limit", str(PAGE_LIMIT)),
        ("resource_type", "mandates"),
        ("action", "created"),
        ("after", "EV000000000007"),
    ]
    assert ("after", "") not in list_params(window, None)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ([event(1)], "a JSON list, not the listing's object"),
        ("events", "a JSON str, not the listing's object"),
        ({"events": {"id": "EV1"}, "meta": {"cursors": {}}}, "events is not a list"),
        ({"meta": {"cursors": {}}}, "events is not a list"),
        ({"events": []}, "meta.cursors is not an object"),
        ({"events": [], "meta": {"cursors": None}}, "meta.cursors is not an object"),
    ],
)
def test_an_answer_that_is_not_the_listing_fails_its_page(doc: Any, says: str) -> None:
    with pytest.raises(ProviderApiAnswerInvalid, match=says):
        listed_events(doc)


def test_the_listing_gives_its_events_and_after_cursor() -> None:
    doc = {"events": [event(1)], "meta": {"cursors": {"before": None, "after": "EV1"}}}
    assert listed_events(doc) == ([event(1)], "EV1")


def test_a_listed_event_is_recorded_as_the_webhook_row_of_one_event() -> None:
    """The body is `{"events":[EVENT]}`, compact, and the scheme reads from it the id and
    type it reads from the webhook's own row of the same event (a request of several,
    split), so the gate makes one a duplicate of the other."""
    listed = listed_event(event(2))
    assert not isinstance(listed, str)
    assert listed.body == orjson.dumps({"events": [event(2)]})
    assert (listed.event_id, listed.event_type, listed.failure) == (
        "EV000000000002",
        "payments.confirmed",
        None,
    )
    assert listed.occurred_at == datetime(2026, 12, 6, 10, 0, 0, 123000, tzinfo=UTC)
    assert listed.headers == HEADERS

    request = orjson.dumps(
        {"events": [event(1), event(2, "mandates", "created")], "meta": {"webhook_id": "WB1"}},
        option=orjson.OPT_INDENT_2,
    )
    params = SchemeParams(secrets=("s",))
    live = [
        webhook_event("gocardless", SCHEME.id_ref(params), SCHEME.type_ref(params), {}, item, NOW)
        for item in split(request, ITEMS_MAX, ITEM_BYTES_MAX)
    ]
    for one in (event(1), event(2, "mandates", "created")):
        entry = listed_event(one)
        assert not isinstance(entry, str) and entry.body is not None
        backfilled = webhook_event(
            "gocardless", SCHEME.id_ref(params), SCHEME.type_ref(params), HEADERS, entry.body, NOW
        )
        row = next(e for e in live if e.event_id == one["id"])
        assert (backfilled.event_id, backfilled.event_type, backfilled.subject) == (
            row.event_id,
            row.event_type,
            row.subject,
        )
        assert backfilled.event_type == entry.event_type


@pytest.mark.parametrize(
    ("entry", "error_class"),
    [
        ("EV000000000001", "BACKFILL_ITEM_NOT_OBJECT"),
        ({k: v for k, v in event(1).items() if k != "id"}, "BACKFILL_ITEM_ID_INVALID"),
        (event(1) | {"id": 7}, "BACKFILL_ITEM_ID_INVALID"),
        (event(1) | {"created_at": "2026-12-06T10:00:00"}, "BACKFILL_ITEM_TIME_INVALID"),
        (event(1) | {"created_at": None}, "BACKFILL_ITEM_TIME_INVALID"),
        (event(1) | {"metadata": {"n": 2**70}}, "BACKFILL_ITEM_UNENCODABLE"),
    ],
)
def test_a_malformed_entry_is_listed_with_its_failure(entry: Any, error_class: str) -> None:
    """Recorded and parked, never dropped; its body is still the row's shape."""
    listed = listed_event(entry)
    assert not isinstance(listed, str) and listed.failure is not None
    assert listed.failure.error_class == error_class
    assert listed.body is not None and listed.body.startswith(b'{"events":[')
    if error_class in ("BACKFILL_ITEM_NOT_OBJECT", "BACKFILL_ITEM_ID_INVALID"):
        assert listed.event_id.startswith("sha256:")


def test_an_entry_without_bytes_is_one_line() -> None:
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    assert isinstance(listed_event(event(1) | {"metadata": deep}), str)


@pytest.mark.parametrize(
    ("entry", "typed"),
    [
        (event(1), "payments.confirmed"),
        (event(1) | {"action": None}, None),
        (event(1) | {"resource_type": ""}, None),
        ({k: v for k, v in event(1).items() if k != "action"}, None),
    ],
)
def test_the_type_is_resource_type_and_action(entry: dict[str, Any], typed: str | None) -> None:
    assert event_type(entry) == typed


@pytest.mark.parametrize(
    ("events", "after", "cursor", "lines"),
    [
        ([event(1)], "EV000000000001", "EV000000000001", 0),
        ([event(1)], None, None, 0),  # the last page
        ([], "EV000000000001", None, 0),  # nothing listed: nothing to go on from
        ([event(1)], "EV\x00", None, 1),  # a cursor that could not be sent back
        ([event(1)], 12, None, 1),
        ([event(1)], "", None, 1),
        ([event(1)], "x" * 1000, None, 1),
    ],
)
def test_the_next_page_is_the_after_cursor_when_it_can_be_sent_back(
    events: list[Any], after: Any, cursor: str | None, lines: int
) -> None:
    page = listed_page(events, after)
    assert (page.next_cursor, len(page.unusable), len(page.items)) == (cursor, lines, len(events))
    if lines:
        assert "the listing ends" in page.unusable[0]
