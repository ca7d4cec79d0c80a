"""Hostile dead letters render as text: markup in the payload, the headers, the event
id and the error message appears HTML-escaped, never as markup; bytes that are not
UTF-8 are shown as hex."""

from __future__ import annotations

import orjson
from markupsafe import escape

from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import STRIPE_HEADERS, park

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'


async def test_markup_in_a_dead_letter_is_escaped_everywhere(console: ConsoleHarness) -> None:
    payload = orjson.dumps({"id": "evt_x", "note": SCRIPT, "name": IMG})
    async with console.pool.acquire() as conn:
        row_id = await park(
            conn,
            f"evt_{IMG}",
            payload=payload,
            error_message=f"bad field {SCRIPT}",
            headers={**STRIPE_HEADERS, "X-Note": IMG},
        )
    browser = await console.session_client(Role.INVESTIGATOR)
    for path in (f"/console/dlq/{row_id}", "/console/dlq", "/console/dlq?search=evt_"):
        r = await browser.get(path)
        assert r.status_code == 200
        page = r.text
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "onerror=alert(1)>" not in page.replace("onerror=alert(1)&gt;", ""), path
        # The text is all there, escaped, for a person to read.
        assert str(escape(IMG)) in page, path
    detail = (await browser.get(f"/console/dlq/{row_id}")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    # Both payload views and the header value carry the text, escaped.
    assert detail.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3


async def test_invalid_utf8_is_shown_as_hex(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        row_id = await park(conn, "evt_bytes", payload=b"\xff\xfe<b>\x00bad\xc3\x28")
    r = await console.client(Role.INVESTIGATOR).get(f"/console/dlq/{row_id}")
    assert r.status_code == 200
    assert "Not UTF-8: shown as hex." in r.text
    assert "00000000  ff fe 3c 62 3e 00 62 61 64 c3 28" in r.text
    assert "<b>" not in r.text.split("<main", 1)[1].split("Payload", 1)[1]
