"""The pure parts behind the console's dead-letter pages: the filter read from a query
string (the same grammar and code as `gateway dlq list`), the keyset cursor, masked
headers, payload views and the runbook pointer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.dlq.filters import build_filter, filter_from_query, filter_query
from gateway.core.dlq.pages import DlqPage, decode_cursor, encode_cursor, page_rows
from gateway.core.dlq.view import (
    MASKED,
    PayloadForm,
    masked_headers,
    payload_view,
    secret_header,
    trace_id,
)
from gateway.core.failures.runbook import runbook_entry
from gateway.core.keyset import Keyset
from gateway.errors import DlqUsageError

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_query_reads_as_the_flags_do() -> None:
    """A query string gives the filter the same flags give `build_filter`."""
    params = {
        "stage": ["settlement", ""],
        "provider": ["stripe"],
        "error_class": ["unknown_merchant"],
        "type": ["payment_intent.*", " charge.refunded "],
        "since": ["2h"],
        "search": ["  evt_1 "],
        "min_attempts": ["3"],
        "state": ["any"],
        "cursor": ["ignored by the filter"],
    }
    expected = build_filter(
        NOW,
        stages=["settlement"],
        providers=["stripe"],
        error_classes=["UNKNOWN_MERCHANT"],
        types=["payment_intent.*", "charge.refunded"],
        since="2h",
        search="evt_1",
        min_attempts="3",
        include_all=True,
    )
    f = filter_from_query(NOW, params)
    assert f == expected
    assert f.resolved is None and f.search == "evt_1" and f.min_attempts == 3
    assert f.since == NOW - timedelta(hours=2)


def test_empty_form_fields_are_the_default_filter() -> None:
    """A GET form submitted with every field empty lists open rows, unnarrowed."""
    f = filter_from_query(NOW, {k: [""] for k in ("stage", "since", "search", "state")})
    assert f.resolved is False and not f.narrowed


def test_filter_query_round_trips() -> None:
    """A filter written as a query string reads back as itself (times made absolute)."""
    f = filter_from_query(
        NOW,
        {
            "stage": ["ingest"],
            "type": ["a.*"],
            "since": ["1d"],
            "until": ["1h"],
            "search": ["x"],
            "min_attempts": ["2"],
            "state": ["resolved"],
        },
    )
    back: dict[str, list[str]] = {}
    for key, value in filter_query(f):
        back.setdefault(key, []).append(value)
    assert filter_from_query(NOW + timedelta(days=3), back) == f


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"state": ["closed"]}, "state: 'closed' is not one of open, resolved, any"),
        ({"since": ["1h", "2h"]}, "since: give it once"),
        ({"stage": ["settlment"]}, "unknown stage"),
        ({"type": ["in*voice"]}, "--type: .* may only end a pattern"),
        ({"search": ["x" * 201]}, "--search: at most 200 characters"),
        ({"search": ["a\x00b"]}, "--search: must not hold control characters"),
        ({"min_attempts": ["0"]}, "--min-attempts: '0' is not a whole number"),
        ({"min_attempts": ["9" * 5000]}, "--min-attempts: '9999"),
        ({"min_attempts": ["²"]}, "--min-attempts"),
        ({"since": ["1h"], "until": ["2h"]}, "--since must be earlier than --until"),
        ({"error_class": ["a\x00"]}, "--error-class: .* is not a name"),
        ({"provider": ["p" * 201]}, "--provider: .* is not a name"),
    ],
)
def test_bad_query_is_one_line(params: dict[str, list[str]], message: str) -> None:
    """Each mistake is refused with the one line the CLI would print for it."""
    with pytest.raises(DlqUsageError, match=message) as caught:
        filter_from_query(NOW, params)
    assert "\n" not in str(caught.value)


def test_cursor_round_trips_and_refuses_forgeries() -> None:
    """A cursor names a position; anything else is refused, never guessed at."""
    at = Keyset(datetime(2026, 11, 30, 9, 1, 2, 345678, tzinfo=UTC), 412)
    assert decode_cursor(encode_cursor(at)) == at
    assert decode_cursor(None) is None and decode_cursor("") is None
    for bad in (
        "nope",
        "!!!",
        encode_cursor(at)[:-3],
        "x" * 300,
        "WyIyMDI2LTExLTMwVDA5OjAxOjAyKzAwOjAwIiwtMV0",
    ):
        with pytest.raises(DlqUsageError, match="cursor"):
            decode_cursor(bad)


def test_page_size_and_capped_counts() -> None:
    """`limit` is bounded; a count past the cap reads `10,000+`."""
    assert page_rows(None) == 50 and page_rows("200") == 200
    for bad in ("0", "501", "-1", "ten"):
        with pytest.raises(DlqUsageError, match="limit"):
            page_rows(bad)
    assert DlqPage([], None, 1234, False).total_text == "1,234"
    assert DlqPage([], None, 10_001, True).total_text == "10,000+"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("Stripe-Signature", True),
        ("stripe-signature", True),
        ("Paddle-Signature", True),
        ("webhook-signature", True),
        ("Signature", True),
        ("X-Hub-Signature", True),
        ("X-Hub-Signature-256", True),
        ("X-Shopify-Hmac-Sha256", True),
        ("X-Acme-Signature", True),
        ("Authorization", True),
        ("Proxy-Authorization", True),
        ("Cookie", True),
        ("X-Api-Key", True),
        ("Content-Type", False),
        ("User-Agent", False),
        ("Webhook-Id", False),
        ("traceparent", False),
    ],
)
def test_secret_headers(name: str, secret: bool) -> None:
    """Signature, credential and cookie headers are masked; the rest are shown."""
    assert secret_header(name) is secret


def test_masked_headers_hide_values_only() -> None:
    """The names stay, sorted; only secret values are replaced."""
    lines = masked_headers({"Stripe-Signature": "t=1,v1=abc", "content-type": "application/json"})
    assert [(h.name, h.value, h.masked) for h in lines] == [
        ("content-type", "application/json", False),
        ("Stripe-Signature", MASKED, True),
    ]


def test_payload_views() -> None:
    """JSON is pretty-printed, other UTF-8 kept as text, anything else shown as hex."""
    hostile = b'{"a": "<script>alert(1)</script>"}'
    view = payload_view(hostile)
    assert view.form is PayloadForm.JSON and view.size_bytes == len(hostile)
    assert (
        view.pretty == '{\n  "a": "<script>alert(1)</script>"\n}' and view.raw == hostile.decode()
    )
    assert len(view.sha256) == 64
    assert payload_view(b"plain <b>").form is PayloadForm.TEXT
    binary = payload_view(b"\xff\xfe{")
    assert binary.form is PayloadForm.HEX and binary.pretty.startswith("00000000  ff fe 7b")
    assert payload_view(b"", removed=True).form is PayloadForm.REMOVED


def test_trace_id_from_headers_or_row() -> None:
    """The trace id is read from a valid traceparent, the header first."""
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert trace_id({"Traceparent": tp}) == "0af7651916cd43dd8448eb211c80319c"
    assert trace_id({}, tp) == "0af7651916cd43dd8448eb211c80319c"
    assert trace_id({"traceparent": "junk"}) is None


def test_runbook_points_at_the_stage_section() -> None:
    """A permanent class points at its stage's section, others at their family's."""
    entry = runbook_entry("unknown_merchant", "settlement")
    assert entry is not None and entry.section.endswith("#settlement-data-and-accounts")
    assert entry.action == "`gateway ledger open-account MERCHANT_ID`, then replay."
    assert entry.family == "permanent" and entry.meaning == "The merchant has no ledger account."
    transient = runbook_entry("LEDGER_UNAVAILABLE", "settlement")
    assert transient is not None and transient.section.endswith("#retries-exhausted")
    assert runbook_entry("NOT_A_CODE", "ingest") is None
