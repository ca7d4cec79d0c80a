"""How the operator commands print: ages, terminal-safe text, tables and payloads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.cli.format import decode_payload, format_age, safe, table
from gateway.cli.pages import dead_letter_page, dead_letter_row_doc
from gateway.core.dlq.model import DlqRow


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "0s"), (42, "42s"), (300, "5m"), (7500, "2h05m"), (273_600, "3d04h")],
)
def test_ages(seconds: int, text: str) -> None:
    """Ages are compact and never negative (clocks differ a little)."""
    assert format_age(seconds) == text


def test_terminal_text_is_made_harmless() -> None:
    """Escape sequences a sender put in a payload cannot drive the operator's terminal."""
    assert safe("red \x1b[31m\nok\t") == "red \\x1b[31m\nok\t"
    assert table(("id", "event id"), [(1, "a\x07")]) == "ID  EVENT ID\n1   a\\x07"


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b'{"a": 1}', "json"),
        (b"a=1&b=2", "text"),
        (b"\xff\xfe\x00", "base64"),
        (b"[" * 300 + b"]" * 300, "text"),  # parses, but orjson prints only 254 levels
        (b"[" * 2000 + b"]" * 2000, "text"),  # deeper than orjson parses
        (b'\xef\xbb\xbf{"a": 1}', "text"),  # a BOM
        (b'{"a": 1e400}', "text"),
        (b'{"a": "\\ud800"}', "text"),  # a lone surrogate escape
    ],
)
def test_payload_decoding(payload: bytes, kind: str) -> None:
    """Payloads are shown as JSON when they can be printed as JSON, else as text, else as
    base64."""
    assert decode_payload(payload)[0] == kind


def test_show_page_prints_a_deeply_nested_payload_as_text() -> None:
    """`dlq show` prints what orjson cannot pretty-print, byte for byte, without a traceback."""
    payload = b"[" * 300 + b"]" * 300
    at = datetime(2026, 1, 1, tzinfo=UTC)
    row = DlqRow(
        1, 1, "ingest", "stripe", "evt_1", None, "PAYLOAD_NOT_JSON", "deep", None,
        payload, {}, 1, at, at, at, False, None, None, None, None,
    )  # fmt: skip
    page = dead_letter_page(row, at)
    assert f"payload (text, {len(payload)} bytes)" in page
    assert payload.decode() in page
    assert dead_letter_row_doc(row)["payload"] == payload.decode()  # `show --json` can print it
