"""The load generator: posts the planned events as a provider would, and records every answer.

Every event is delivered `deliveries` times (1 to 5), all deliveries shuffled together
(a refund never before its payment's first delivery) and sent concurrently, optionally
paced at `rate_per_s`. Like a real provider, a delivery that gets no 2xx (a 5xx, a
408/429, a refused or cut connection, a timeout) is signed again and retried with
backoff until it gets one or `retry_for_s` runs out; a 4xx is final. Each attempt goes
to the next gateway URL in turn, skipping for a while one that refused a connection, so
a killed process's share moves to the others. Every attempt's answer is recorded.

    python -m chaos.loadgen --url http://127.0.0.1:8080 --events 500 --out load.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from chaos.workload import LoadSpec, PlannedEvent, plan, sign

_RETRIED_4XX = frozenset({408, 425, 429})
_DOWN_S = 2.0  # a URL that refused a connection is skipped this long (if others remain)


@dataclass(frozen=True)
class Answer:
    """One delivery attempt and what came back (`status` 0: no HTTP answer at all)."""

    event: int
    delivery: int
    attempt: int
    status: int
    outcome: str  # "accepted" | "duplicate" | an error name
    at_s: float  # when it was sent, from the start of the run
    took_s: float


@dataclass
class LoadRecord:
    """A run: what was planned and every answer received."""

    run: str
    spec: LoadSpec
    events: list[PlannedEvent]
    answers: list[Answer] = field(default_factory=list)
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "spec": self.spec.to_json(),
            "events": [e.to_json() for e in self.events],
            "answers": [asdict(a) for a in self.answers],
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LoadRecord:
        return cls(
            run=doc["run"],
            spec=LoadSpec(**doc["spec"]),
            events=[PlannedEvent.from_json(e) for e in doc["events"]],
            answers=[Answer(**a) for a in doc["answers"]],
            duration_s=float(doc.get("duration_s", 0.0)),
        )

    def save(self, path: Path) -> None:
        path.write_bytes(orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2))

    @classmethod
    def load(cls, path: Path) -> LoadRecord:
        return cls.from_json(orjson.loads(path.read_bytes()))

    def statuses(self) -> Counter[int]:
        return Counter(a.status for a in self.answers)


class LoadGen:
    """Sends one planned run against one or more gateway base URLs."""

    def __init__(self, urls: list[str], spec: LoadSpec, run: str | None = None) -> None:
        if not urls:
            raise ValueError("at least one gateway URL is needed")
        self.spec = spec
        self.record = LoadRecord(run or uuid.uuid4().hex[:8], spec, [])
        self.record.events = plan(spec, self.record.run)
        self._urls = urls
        self._turn = itertools.count()
        self._down_until: dict[str, float] = {}
        self._rng = random.Random(spec.seed + 1)
        self.total = sum(e.deliveries for e in self.record.events)
        self.done = 0  # deliveries finished (2xx, final 4xx, or given up)
        self._progress = asyncio.Condition()
        self._started = 0.0

    def elapsed(self) -> float:
        """Seconds since the run started, on the clock `Answer.at_s` uses."""
        return time.monotonic() - self._started

    async def reached(self, fraction: float) -> None:
        """Wait until this share of the deliveries has finished."""
        async with self._progress:
            await self._progress.wait_for(lambda: self.done >= fraction * self.total)

    async def run(self) -> LoadRecord:
        deliveries = self._order()
        self._started = time.monotonic()
        gate = asyncio.Semaphore(self.spec.concurrency)
        limits = httpx.Limits(max_connections=self.spec.concurrency)
        async with httpx.AsyncClient(timeout=self.spec.request_timeout_s, limits=limits) as http:

            async def one(k: int, event: PlannedEvent, delivery: int) -> None:
                if self.spec.rate_per_s:
                    await asyncio.sleep(
                        max(0.0, self._started + k / self.spec.rate_per_s - time.monotonic())
                    )
                async with gate:
                    await self._deliver(http, event, delivery)
                async with self._progress:
                    self.done += 1
                    self._progress.notify_all()

            await asyncio.gather(*(one(k, e, n) for k, (e, n) in enumerate(deliveries)))
        self.record.duration_s = time.monotonic() - self._started
        return self.record

    def _order(self) -> list[tuple[PlannedEvent, int]]:
        """Every delivery, shuffled, except that a refund is never sent before the first
        delivery of the payment it refunds (a provider cannot refund what it has not
        reported paid; retries and duplicates still arrive in any order)."""
        keys = {}
        first_payment: dict[str, float] = {}
        for e in self.record.events:
            if e.kind != "refund":
                keys[e.index] = [self._rng.random() for _ in range(e.deliveries)]
                if e.kind == "payment" and e.settlement_id:
                    first_payment[e.settlement_id] = min(keys[e.index], default=0.0)
        for e in self.record.events:
            if e.kind == "refund":
                after = first_payment.get(e.settlement_id or "", 0.0)
                keys[e.index] = [
                    after + (1 - after) * self._rng.random() for _ in range(e.deliveries)
                ]
        ordered = [(k, e, n + 1) for e in self.record.events for n, k in enumerate(keys[e.index])]
        return [(e, n) for _, e, n in sorted(ordered, key=lambda t: t[0])]

    async def _deliver(self, http: httpx.AsyncClient, event: PlannedEvent, delivery: int) -> None:
        deadline = time.monotonic() + self.spec.retry_for_s
        backoff_s = 0.25
        for attempt in itertools.count(1):
            status, outcome, at_s, took_s = await self._attempt(http, event)
            self.record.answers.append(
                Answer(event.index, delivery, attempt, status, outcome, at_s, took_s)
            )
            final = 200 <= status < 300 or (400 <= status < 500 and status not in _RETRIED_4XX)
            if final or time.monotonic() + backoff_s > deadline:
                return
            await asyncio.sleep(backoff_s * self._rng.uniform(0.8, 1.2))
            backoff_s = min(backoff_s * 2, 2.0)

    def _pick_url(self) -> str:
        """The next URL in turn, skipping any that refused a connection lately."""
        now = time.monotonic()
        up = [u for u in self._urls if self._down_until.get(u, 0.0) <= now] or self._urls
        return up[next(self._turn) % len(up)]

    async def _attempt(
        self, http: httpx.AsyncClient, event: PlannedEvent
    ) -> tuple[int, str, float, float]:
        base = self._pick_url()
        sent = time.monotonic()
        try:
            response = await http.post(
                f"{base}/webhooks/{event.provider}", content=event.body, headers=sign(event)
            )
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ConnectError):  # as a load balancer would: skip it a while
                self._down_until[base] = time.monotonic() + _DOWN_S
            return 0, type(exc).__name__, sent - self._started, time.monotonic() - sent
        took_s = time.monotonic() - sent
        try:
            outcome = str(response.json().get("status") or response.json().get("error"))
        except ValueError:
            outcome = "unreadable"
        return response.status_code, outcome, sent - self._started, took_s


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.loadgen", description=__doc__)
    parser.add_argument(
        "--url", action="append", required=True, help="gateway base URL (repeatable)"
    )
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=0.0, help="attempts per second (0: flat out)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("load.json"))
    args = parser.parse_args()
    spec = LoadSpec(
        events=args.events, rate_per_s=args.rate, concurrency=args.concurrency, seed=args.seed
    )
    record = asyncio.run(LoadGen(args.url, spec).run())
    record.save(args.out)
    print(
        f"run {record.run}: {len(record.answers)} attempts in {record.duration_s:.1f} s, "
        f"statuses {dict(record.statuses())}; written to {args.out}"
    )


if __name__ == "__main__":
    main()
