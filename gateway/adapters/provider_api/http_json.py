"""One bounded call for JSON to a provider's API, and the client it goes through: a
GET, or a POST of a JSON query (Square's SearchEvents is a search, not a write, so it
is retried as a GET is).

What the gateway trusts here is the provider's API reached over verified TLS with the
account's key (docs/operations.md, "What a backfilled event proves"), so the
client:
- follows no redirect: a 3xx is `ProviderApiRedirected`, and the key, which travels in a
  header, is never sent to the host a redirect names;
- verifies certificates (httpx's default, certifi's roots); a refused one is
  `ProviderApiCertificate` at once, not a network error retried for minutes;
- reads an answer as a stream and stops at `api_max_answer_bytes` (a declared
  `Content-Length` past it is refused before reading); the cap counts decoded bytes, so
  a compressed answer cannot expand past it either;
- gives the whole answer, from the request to its last byte, `api_timeout_s`: httpx's
  own read timeout runs per read, so an answer trickled a byte at a time would pass it.

The document is parsed by the standard library: orjson would read an integer wider than
64 bits as a float, changing the event before anything could notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway.adapters.http_answers import certificate_refused, read_capped
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Answer, Clock, call_api
from gateway.core.backfill.decisions import DEFAULT_API_RETRY, ApiRetryPolicy
from gateway.errors import (
    ProviderApiAnswerInvalid,
    ProviderApiAnswerTooLarge,
    ProviderApiCertificate,
    ProviderApiRedirected,
)
from gateway.settings.provider_api import ApiLimits, ProviderApi

Params = Sequence[tuple[str, str]]


def _too_large(what: str, cap: int) -> Callable[[int | None], ProviderApiAnswerTooLarge]:
    def error(declared: int | None) -> ProviderApiAnswerTooLarge:
        if declared is not None:
            return ProviderApiAnswerTooLarge(
                f"{what}: the answer declares {declared} bytes, more than "
                f"api_max_answer_bytes ({cap}); not read"
            )
        return ProviderApiAnswerTooLarge(
            f"{what}: the answer passed api_max_answer_bytes ({cap}); reading stopped there"
        )

    return error


async def get_json(
    client: httpx.AsyncClient, url: str, params: Params, limits: ApiLimits, what: str
) -> Answer[tuple[Any, httpx.Headers]]:
    """A GET of `url` with `params`, its answer parsed (`json_answer`)."""
    answer = await request_bytes(client, "GET", url, limits, what, params=params)
    return json_answer(answer, what)


async def post_json(
    client: httpx.AsyncClient, url: str, query: Any, limits: ApiLimits, what: str
) -> Answer[tuple[Any, httpx.Headers]]:
    """A POST of `query` as a JSON body to `url` (httpx writes it compact,
    `content-type: application/json`), its answer parsed (`json_answer`)."""
    answer = await request_bytes(client, "POST", url, limits, what, query=query)
    return json_answer(answer, what)


def json_answer(
    answer: Answer[tuple[bytes, httpx.Headers]], what: str
) -> Answer[tuple[Any, httpx.Headers]]:
    """`answer` with a 2xx answer's bytes parsed; `ProviderApiAnswerInvalid` when they
    are not JSON."""
    if answer.value is None:
        return Answer(answer.status, answer.retry_after, detail=answer.detail)
    content, headers = answer.value
    return Answer(answer.status, answer.retry_after, (parse_json(content, what), headers))


def parse_json(content: bytes, what: str) -> Any:
    """An answer's document; `ProviderApiAnswerInvalid` when it is not JSON."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the limit
        raise ProviderApiAnswerInvalid(f"{what}: the answer is not JSON") from None


#: An answer as `request_bytes` gives it: its bytes and headers, when they were read.
RawAnswer = Answer[tuple[bytes, httpx.Headers]]


async def request_bytes(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    limits: ApiLimits,
    what: str,
    *,
    params: Params = (),
    query: Any = None,
    headers: Mapping[str, str] | None = None,
    read_refusals: bool = False,
    content: bytes | None = None,
) -> RawAnswer:
    """(status, Retry-After, (a 2xx answer's bytes as received, response headers)): the
    bytes decoded from any content encoding, at most `api_max_answer_bytes`. No answer
    in time, a transport error, or an answer that cannot be decoded is status None
    (retried like a 5xx). Raises what no retry can mend: a redirect, a refused
    certificate, an answer too large. `query`, when given, is the request's JSON body;
    `headers` are sent besides the client's own. `read_refusals`: a 4xx answer's bytes
    are read too (an API that says in its body why it refuses). `content`: the body as
    sent, instead of `query` (an API that signs the very bytes)."""
    try:
        async with asyncio.timeout(limits.timeout_s):
            async with client.stream(
                method, url, params=list(params), json=query, content=content, headers=headers
            ) as response:
                status = response.status_code
                if 300 <= status < 400:
                    target = urlsplit(response.headers.get("location", "")).netloc or "nowhere"
                    raise ProviderApiRedirected(
                        f"{what}: the API answered {status}, a redirect to {target!r}; "
                        "the gateway follows no redirect, so the API key stays with "
                        "api_url's host"
                    )
                retry_after = response.headers.get("retry-after")
                if not (200 <= status < 300 or (read_refusals and 400 <= status < 500)):
                    await _drain(response)
                    return Answer(status, retry_after, detail=response.reason_phrase)
                cap = limits.max_answer_bytes
                content = await read_capped(response, cap, _too_large(what, cap))
                headers = response.headers
    except TimeoutError:
        return Answer(
            None, detail=f"no complete answer within api_timeout_s ({limits.timeout_s:g} s)"
        )
    except httpx.TransportError as exc:
        if certificate_refused(exc):
            raise ProviderApiCertificate(
                f"{what}: the API's TLS certificate is not trusted; the gateway talks to "
                "the provider over verified TLS only"
            ) from exc
        return Answer(None, detail=type(exc).__name__)
    except httpx.HTTPError as exc:  # an answer that cannot be decoded: as good as none
        return Answer(None, detail=type(exc).__name__)
    return Answer(status, retry_after, (content, headers))


#: The most bytes of a refusal read (and dropped) so its connection can be used again.
DRAIN_BYTES_MAX = 65_536


async def _drain(response: httpx.Response) -> None:
    """Read a refusal's short body so the connection goes back to the pool (a 429 or
    503 each costing a new TLS handshake would add to an outage); a longer one is left,
    and its connection closed."""
    with contextlib.suppress(_RefusalTooLong):
        await read_capped(response, DRAIN_BYTES_MAX, _RefusalTooLong)


class _RefusalTooLong(Exception):
    """A refusal's body past `DRAIN_BYTES_MAX`: left unread."""


def open_client(api: ProviderApi, headers: Mapping[str, str]) -> httpx.AsyncClient:
    """The client of one source: the key in its headers, no redirects, verified TLS."""
    return httpx.AsyncClient(
        headers=dict(headers),
        timeout=httpx.Timeout(api.limits.timeout_s),
        follow_redirects=False,
        verify=True,
    )


class ApiCalls:
    """A source's calls during one pass: each retried by `call_api`, its retries never
    running past the pass's `api_max_pass_s` (the source is opened for one pass)."""

    def __init__(self, api: ProviderApi, headers: Mapping[str, str], clock: Clock = REAL_CLOCK):
        self.client = open_client(api, headers)
        self._limits = api.limits
        self._clock = clock
        self._ends = clock.monotonic() + api.limits.max_pass_s

    async def get(self, url: str, params: Params, what: str) -> tuple[Any, httpx.Headers]:
        return await call_api(
            lambda: get_json(self.client, url, params, self._limits, what),
            what,
            policy=self._policy(),
            clock=self._clock,
        )

    async def post(self, url: str, query: Any, what: str) -> tuple[Any, httpx.Headers]:
        """A search sent as a JSON body, bounded and retried exactly as `get`."""
        return await call_api(
            lambda: post_json(self.client, url, query, self._limits, what),
            what,
            policy=self._policy(),
            clock=self._clock,
        )

    def _policy(self) -> ApiRetryPolicy:
        """The retry policy of the next call: its retries end with the pass."""
        left_s = max(0.0, self._ends - self._clock.monotonic())
        return replace(DEFAULT_API_RETRY, deadline_s=min(DEFAULT_API_RETRY.deadline_s, left_s))

    async def close(self) -> None:
        await self.client.aclose()
