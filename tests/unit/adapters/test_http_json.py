"""`provider_api.http_json.request_bytes`, the one call to a provider's API that backfill
and the confirm stage share, holds each bound on an answer: a refusal's body is read up
to `DRAIN_BYTES_MAX` (so its connection is used again) and no further, an answer is
capped by its decoded size (a compressed one cannot expand past the cap), an answer
that cannot be decoded or does not arrive in time is no answer, and a document that is
not JSON is refused. Against `httpx.MockTransport`, counting what the server was asked
to send."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from gateway.adapters.provider_api.http_json import (
    DRAIN_BYTES_MAX,
    json_answer,
    request_bytes,
)
from gateway.adapters.provider_api.retrying import Answer
from gateway.errors import ProviderApiAnswerInvalid, ProviderApiAnswerTooLarge
from gateway.settings.provider_api import ApiLimits

URL = "https://api.example.com/v2/payments/tr_x"
CHUNK_BYTES = 4_096
LIMITS = ApiLimits(max_answer_bytes=65_536, timeout_s=5.0)


class Body:
    """A streamed body of `chunks` pieces of `CHUNK_BYTES`, `delay_s` apart; counts the
    pieces the client pulled and whether it pulled them all."""

    def __init__(self, chunks: int, delay_s: float = 0.0) -> None:
        self.chunks = chunks
        self.delay_s = delay_s
        self.pulled = 0
        self.finished = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.pulled += 1
            yield b" " * CHUNK_BYTES
        self.finished = True


def client(answer: Callable[[], httpx.Response]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(lambda _: answer()))


async def fetch(
    answer: Callable[[], httpx.Response], limits: ApiLimits = LIMITS
) -> Answer[tuple[bytes, httpx.Headers]]:
    async with client(answer) as http:
        return await request_bytes(http, "GET", URL, limits, "test")


async def test_a_refusals_short_body_is_read_whole_so_its_connection_is_used_again() -> None:
    body = Body(3)
    answer = await fetch(lambda: httpx.Response(503, headers={"Retry-After": "7"}, content=body))
    assert (answer.status, answer.retry_after, answer.value) == (503, "7", None)
    assert body.finished


async def test_a_refusals_long_body_is_read_no_further_than_the_drain_bound() -> None:
    """A 429 streaming a megabyte: reading stops past `DRAIN_BYTES_MAX`; the refusal is
    still a refusal (retried as its status says), not an answer too large."""
    body = Body(256)
    answer = await fetch(lambda: httpx.Response(429, content=body))
    assert answer.status == 429
    assert body.pulled == DRAIN_BYTES_MAX // CHUNK_BYTES + 1
    assert not body.finished


async def test_a_refusal_declaring_a_long_body_is_not_read_at_all() -> None:
    body = Body(256)
    headers = {"Content-Length": str(256 * CHUNK_BYTES)}
    answer = await fetch(lambda: httpx.Response(503, headers=headers, content=body))
    assert answer.status == 503
    assert body.pulled == 0


async def test_an_answer_streamed_past_the_cap_stops_there() -> None:
    body = Body(256)
    with pytest.raises(ProviderApiAnswerTooLarge, match="passed api_max_answer_bytes"):
        await fetch(lambda: httpx.Response(200, content=body))
    assert body.pulled == LIMITS.max_answer_bytes // CHUNK_BYTES + 1


async def test_a_compressed_answer_is_capped_by_its_decoded_size() -> None:
    """A gzip of a megabyte of blanks is about a kilobyte on the wire: the cap counts
    what it expands to."""
    bomb = gzip.compress(b" " * (1 << 20))
    assert len(bomb) < LIMITS.max_answer_bytes
    headers = {"Content-Encoding": "gzip"}
    with pytest.raises(ProviderApiAnswerTooLarge, match="passed api_max_answer_bytes"):
        await fetch(lambda: httpx.Response(200, headers=headers, content=bomb))


async def test_an_answer_that_cannot_be_decoded_is_no_answer() -> None:
    headers = {"Content-Encoding": "gzip"}
    answer = await fetch(lambda: httpx.Response(200, headers=headers, content=b"not gzip"))
    assert (answer.status, answer.value, answer.detail) == (None, None, "DecodingError")


async def test_an_answer_trickled_past_the_timeout_is_no_answer() -> None:
    """Each piece arrives well within any per-read timeout; the whole does not arrive
    within `api_timeout_s`."""
    body = Body(50, delay_s=0.05)
    limits = ApiLimits(max_answer_bytes=1 << 20, timeout_s=0.5)
    answer = await fetch(lambda: httpx.Response(200, content=body), limits)
    assert (answer.status, answer.value) == (None, None)
    assert "api_timeout_s (0.5 s)" in answer.detail
    assert not body.finished


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"<html>maintenance</html>", id="html"),
        pytest.param(b'{"id": "tr_x"', id="cut-short"),
        pytest.param(b'{"id": "\xff"}', id="not-utf-8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-past-the-limit"),
    ],
)
def test_a_document_that_is_not_json_is_refused(content: bytes) -> None:
    answer = Answer(200, None, (content, httpx.Headers()))
    with pytest.raises(ProviderApiAnswerInvalid, match="not JSON"):
        json_answer(answer, "test")


def test_a_refusal_passes_through_unparsed() -> None:
    answer: Answer[tuple[bytes, httpx.Headers]] = Answer(503, "7", detail="Service Unavailable")
    assert json_answer(answer, "test") == Answer(503, "7", detail="Service Unavailable")
