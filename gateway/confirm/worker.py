"""`gateway confirm`'s loop: claim due fetches, fetch each from its provider's API
(paced per provider), and settle each in one transaction.

Nothing waits in memory: a claim takes at most one round's worth of fetches for a lease,
and everything else stays in `confirmations`, so an API down for hours leaves its
webhooks waiting in PostgreSQL and a restart resumes them. A fetch that fails, or a
database that fails while a fetch is settled, never stops the loop: the row's lease runs
out and the fetch is tried again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres.confirmations import (
    Claim,
    claim_due,
    mark_fetched,
    mark_parked,
    pending_stats,
    retry_later,
)
from gateway.adapters.postgres.webhooks import record_events, record_failure
from gateway.adapters.provider_api.http_json import (
    RawAnswer,
    open_client,
    parse_json,
    request_bytes,
)
from gateway.adapters.provider_api.retrying import Answer
from gateway.confirm.pacing import Pace
from gateway.confirm.sources import ConfirmSource, standing
from gateway.core.confirm.decisions import (
    ConfirmState,
    Decision,
    Verdict,
    decide,
    wait_s,
    within_deadline,
)
from gateway.core.confirm.events import confirmed_events
from gateway.core.events.model import Event, Failure, Stage
from gateway.core.providers.base import (
    ApiCredentials,
    ApiRequest,
    Decode,
)
from gateway.errors import ConfirmationMismatch, ErrorClass, PayloadInvalid, ProviderApiRefused
from gateway.metrics import Metrics
from gateway.settings.confirm import ConfirmSettings

log = logging.getLogger(__name__)


#: Seconds between readings of the pending fetches for the gauges.
GAUGE_INTERVAL_S = 5.0


class ConfirmWorker:
    """Fetches owed by the given providers' webhooks, until cancelled."""

    def __init__(
        self,
        pool: Pool,
        sources: Sequence[ConfirmSource],
        settings: ConfirmSettings,
        metrics: Metrics,
        *,
        rand: Callable[[], float] = random.random,
        nonce: Callable[[], str] = lambda: secrets.token_hex(8),
    ) -> None:
        self._pool = pool
        self._sources: Mapping[str, ConfirmSource] = {s.shaping.provider: s for s in sources}
        self._settings = settings
        self._metrics = metrics
        self._rand = rand
        self._nonce = nonce
        self._readers = {name: s.read_answer for name, s in self._sources.items()}
        self._clients = {
            name: open_client(s.api, s.confirmation.auth(s.api.key))
            for name, s in self._sources.items()
        }
        self._paces = {
            name: Pace(settings.rate_per_s, settings.concurrency) for name in self._sources
        }
        # One claim is at most what the providers' paces start within half a lease, and
        # twice what their slots hold at once (a round waits for its slowest fetch), so
        # no claimed fetch outlives its lease waiting for its turn.
        per_lease = int(settings.rate_per_s * settings.lease_s / 2)
        per_round = min(settings.batch, per_lease, 2 * settings.concurrency)
        self._claim_max = max(1, per_round * len(self._sources))

    async def run(self) -> None:
        gauges = asyncio.create_task(self._watch_gauges())
        # Fetches run as a pipeline: a slot freed by one that ended is claimed again at
        # once, so one slow answer holds its own slot, never the whole stage.
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                try:
                    claims = await self._claim(self._claim_max - len(running))
                except Exception as exc:  # the database is away: the loop waits, never stops
                    log.warning("confirm: cannot claim fetches", extra=_problem(exc))
                    claims = []
                running |= {asyncio.create_task(self._settle_safely(c)) for c in claims}
                running = await self._wait_for_room(running, idle=not claims)
        finally:
            gauges.cancel()
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for client in self._clients.values():
                await client.aclose()

    async def _wait_for_room(
        self, running: set[asyncio.Task[None]], *, idle: bool
    ) -> set[asyncio.Task[None]]:
        """The fetches still running once there is room to claim more: at once while
        slots are free and fetches were due; with every slot taken, until one ends;
        with nothing due (`idle`), after `poll_s` or as soon as a fetch ends."""
        full = len(running) >= self._claim_max
        if not full and not idle:
            return running
        if not running:
            await asyncio.sleep(self._settings.poll_s)
            return running
        timeout = None if full else self._settings.poll_s
        _, pending = await asyncio.wait(
            running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        return pending

    async def _claim(self, limit: int) -> list[Claim]:
        if limit <= 0:
            return []
        async with connection(self._pool) as conn:
            return await claim_due(conn, list(self._sources), limit, self._settings.lease_s)

    async def _settle_safely(self, claim: Claim) -> None:
        try:
            await self._settle(claim)
        except Exception as exc:
            # The row stays claimed until its lease ends, then it is tried again.
            log.warning(
                "confirm: fetch not settled; tried again when its lease ends",
                extra={"provider": claim.provider, "event_id": claim.event_id,
                       "error_type": type(exc).__name__, "error": str(exc)[:200]},
            )  # fmt: skip

    async def _settle(self, claim: Claim) -> None:
        source = self._sources[claim.provider]
        confirmation = source.confirmation
        try:
            doc = _read(source.document, claim.body)
            fetch = self._fetch_of(source, doc)
            extra = confirmation.headers
            fetch = replace(fetch, headers={**fetch.headers, **(extra(doc) if extra else {})})
        except PayloadInvalid as exc:
            await self._park(claim, Failure(exc.error_class, str(exc)), None)
            return
        if confirmation.vouch is not None and not await self._vouched(source, claim, doc):
            return
        answer = await self._send(source, claim, fetch)
        if answer is None:
            return
        decision = decide(self._settings.policy, answer.status, claim.attempts, self._rand())
        if answer.value is not None and decision.verdict is Verdict.READ:
            await self._confirm(source, claim, doc, answer.value[0])
        elif answer.value is not None and decision.error_class is ErrorClass.CONFIRMATION_REFUSED:
            # A refusal that says why in its body (`reads_refusals`): read for its class
            # only; whatever it holds confirms nothing.
            await self._confirm(source, claim, doc, answer.value[0], refusal=True)
        else:
            await self._retry_or_park(source, claim, doc, answer, decision)

    async def _vouched(self, source: ConfirmSource, claim: Claim, doc: Any) -> bool:
        """Whether the provider vouches for the webhook before its fetch
        (`Confirmation.vouch`); when not, the fetch has ended here: confirmed with
        nothing (nothing to fetch), parked, or due again."""
        confirmation = source.confirmation
        assert confirmation.vouch is not None and confirmation.vouched is not None
        answer = await self._send(source, claim, confirmation.vouch(doc, self._credentials(source)))
        if answer is None:
            return False
        decision = decide(self._settings.policy, answer.status, claim.attempts, self._rand())
        if answer.value is None or decision.verdict is not Verdict.READ:
            await self._retry_or_park(source, claim, doc, answer, decision)
            return False
        try:
            what = f"{claim.provider} vouch {claim.event_id}"
            vouched = confirmation.vouched(doc, parse_json(answer.value[0], what))
        except ProviderApiRefused as exc:  # not JSON
            await self._park(claim, Failure(ErrorClass.CONFIRMATION_REFUSED, str(exc)), None)
            return False
        except PayloadInvalid as exc:  # a forged pairing: another object's answer
            await self._park(claim, Failure(exc.error_class, str(exc)), None)
            return False
        if not vouched:  # nothing the provider would confirm: no fetch, no dead letter
            async with connection(self._pool) as conn:
                if await mark_fetched(conn, claim, ConfirmState.CONFIRMED, None):
                    self._count("unvouched", claim)
        return vouched

    async def _send(
        self, source: ConfirmSource, claim: Claim, request: ApiRequest
    ) -> RawAnswer | None:
        """`request` sent to the provider's API in its pace, timed; None when it was
        refused for good (a redirect, a refused certificate, too large: parked)."""
        if not request.path.startswith("/") or request.path.startswith("//"):  # no other host
            problem = f"the fetch path {request.path[:80]!r} is not a path"
            await self._park(claim, Failure(ErrorClass.GATEWAY_ERROR, problem), None)
            return None
        try:
            async with self._paces[claim.provider].slot():
                started = time.monotonic()
                try:
                    return await self._request(source, claim, request, "confirm")
                finally:
                    self._metrics.confirm_fetch_seconds.observe(
                        time.monotonic() - started, provider=claim.provider
                    )
        except ProviderApiRefused as exc:
            await self._park(claim, Failure(ErrorClass.CONFIRMATION_REFUSED, str(exc)), None)
            return None

    async def _request(
        self, source: ConfirmSource, claim: Claim, request: ApiRequest, verb: str
    ) -> RawAnswer:
        """`request` on the provider's API host (its query as params: httpx would drop
        one left in the URL); raises what no retry mends (`ProviderApiRefused`)."""
        parts = urlsplit(request.path)
        return await request_bytes(
            self._clients[claim.provider], request.method, source.api.url + parts.path,
            source.api.limits, f"{claim.provider} {verb} {claim.event_id}",
            params=parse_qsl(parts.query), content=request.content, headers=request.headers,
            read_refusals=source.confirmation.reads_refusals,
        )  # fmt: skip

    async def _retry_or_park(
        self,
        source: ConfirmSource,
        claim: Claim,
        doc: Any,
        answer: RawAnswer,
        decision: Decision,
    ) -> None:
        """A fetch that did not read: due again after its delay (within the provider's
        deadline, if it has one), or parked with its class."""
        said = f"{answer.status or 'no answer'} {answer.detail}".strip()
        if decision.verdict is not Verdict.RETRY:
            error_class = decision.error_class or ErrorClass.CONFIRMATION_REFUSED
            message = f"the API answered {said} on try {claim.attempts}"
            await self._park(claim, Failure(error_class, message), None)
            return
        now_s = time.time()
        wanted_s = wait_s(self._settings.policy, decision.delay_s, answer.retry_after, now_s)
        deadline_s = source.confirmation.deadline_s
        delay = within_deadline(deadline_s, claim.received_at, wanted_s, now_s)
        if delay is None:
            await self._park_late(source, claim, doc, said)
            return
        async with connection(self._pool) as conn:
            if await retry_later(conn, claim, delay, f"the API answered {said}"):
                self._count("retry", claim)

    async def _confirm(
        self, source: ConfirmSource, claim: Claim, doc: Any, content: bytes, refusal: bool = False
    ) -> None:
        """Record the events the answer holds, and the answer beside the request (what
        the provider lets be kept of it: `Confirmation.kept`)."""
        kept = source.confirmation.kept
        stored = content if kept is None else kept(content)
        try:
            what = f"{claim.provider} confirm {claim.event_id}"
            items = self._readers[claim.provider](doc, parse_json(content, what))
            if refusal:
                raise ConfirmationMismatch(
                    f"the API refused the fetch, yet its answer confirms {len(items)} events"
                )
        except ProviderApiRefused as exc:  # not JSON
            await self._park(claim, Failure(ErrorClass.CONFIRMATION_REFUSED, str(exc)), stored)
            return
        except PayloadInvalid as exc:  # includes ConfirmationMismatch
            await self._park(claim, Failure(exc.error_class, str(exc)), stored)
            return
        events = confirmed_events(source.shaping, items, datetime.now(UTC))
        # Recorded in a transaction of their own, as the ingest path records (a keyed
        # event's number is taken under its key's lock, before anything is written);
        # then the fetch marked. A process that stops in between leaves the fetch due
        # again at its lease's end, and the gate makes the second recording a no-op.
        async with connection(self._pool) as conn:
            if events:
                await record_events(conn, events)
            fetched = await mark_fetched(conn, claim, ConfirmState.CONFIRMED, stored)
        if fetched:  # else claimed again since: counted by the process holding it now
            self._count("confirmed", claim)

    async def _park_late(self, source: ConfirmSource, claim: Claim, doc: Any, said: str) -> None:
        """Parked at the provider's deadline, with where the payment stands as the
        provider's inquiry tells it (asked once, in the provider's pace)."""
        status = "not asked"
        inquiry = source.confirmation.inquiry
        if inquiry is not None:
            asked = inquiry(doc, self._credentials(source))
            try:
                async with self._paces[claim.provider].slot():
                    answer = await self._request(source, claim, asked, "inquiry")
            except ProviderApiRefused as exc:  # a redirect, a refused certificate
                answer = Answer(None, detail=str(exc)[:200])
            status = standing(source.confirmation, answer)
        message = (f"the API answered {said} on try {claim.attempts}, past the deadline; "
                   f"the provider's inquiry says: {status}")  # fmt: skip
        await self._park(claim, Failure(ErrorClass.VERIFY_DEADLINE_PASSED, message), None)

    async def _park(self, claim: Claim, failure: Failure, answer: bytes | None) -> None:
        """A dead letter at stage `confirm`, and the fetch parked, in one transaction."""
        event = Event(claim.provider, claim.event_id, claim.event_type, None, claim.headers,
                      claim.body, claim.received_at)  # fmt: skip
        async with transaction(self._pool) as conn:
            error = f"{failure.error_class}: {failure.message}"
            if not await mark_parked(conn, claim, error, answer):
                return  # claimed again since: the process holding it now decides
            # One attempt of the dead letter's own, whatever the fetches it took (the
            # message says how many): a replay is never skipped for `--max-attempts`.
            await record_failure(conn, claim.webhook_id, Stage.CONFIRM, event, failure)
        self._metrics.dlq_total.inc(stage=Stage.CONFIRM, error_class=failure.error_class)
        self._count("parked", claim)
        log.warning(
            "confirm: fetch parked",
            extra={"provider": claim.provider, "event_id": claim.event_id,
                   "error_class": str(failure.error_class), "attempts": claim.attempts},
        )  # fmt: skip

    def _credentials(self, source: ConfirmSource) -> ApiCredentials:
        return ApiCredentials(source.api.key, source.secrets, self._nonce())

    def _fetch_of(self, source: ConfirmSource, doc: Any) -> ApiRequest:
        """The request a fetch makes: the provider's own (`Confirmation.request`, signed
        with a fresh nonce), else a GET of the path `locate` names."""
        confirmation = source.confirmation
        if confirmation.request is not None:
            return confirmation.request(doc, self._credentials(source))
        return ApiRequest("GET", confirmation.locate(doc))

    def _count(self, outcome: str, claim: Claim) -> None:
        self._metrics.confirm_fetches_total.inc(outcome=outcome, provider=claim.provider)

    async def _watch_gauges(self) -> None:
        while True:
            try:
                async with connection(self._pool) as conn:
                    stats = await pending_stats(conn)
                for name in self._sources:
                    pending, oldest_s = stats.get(name, (0, 0.0))
                    self._metrics.confirm_pending.set(pending, provider=name)
                    self._metrics.confirm_oldest_pending_seconds.set(oldest_s, provider=name)
            except Exception as exc:  # the gauges wait for the next reading
                log.warning("confirm: cannot read the pending fetches", extra=_problem(exc))
            await asyncio.sleep(GAUGE_INTERVAL_S)


def _read(document: Decode | None, body: bytes) -> Any:
    """The recorded request's document, as the provider reads its body."""
    if document is not None:
        return document(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PayloadInvalid("the recorded request is not JSON") from exc


def _problem(exc: BaseException) -> dict[str, str]:
    """A failure as a log line's fields: its type and the start of its message."""
    return {"error_type": type(exc).__name__, "error": str(exc)[:200]}
