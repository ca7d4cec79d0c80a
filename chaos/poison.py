"""Poison deliveries for scenario 11: what an attacker or a broken provider sends beside
genuine traffic, and what each one must get.

- `oversized`: a signed Stripe body over `http.max_body_bytes`: `413`, nothing stored;
- `nul_type`: a signed Stripe event whose type holds a NUL: `200`, stored, parked;
- `unparseable`: a signed Stripe body that is not JSON: `200`, stored under its digest,
  parked;
- `replay`: one signed GitHub delivery, then the same body under forged ids and types:
  one row, every replay `duplicate`;
- `header_flood`: a request head four times `http.max_header_bytes`: `431` (or closed),
  nothing stored;
- `idle`: sockets that send nothing or half a head: closed by the gateway.

Signers are written here from the providers' documentation, like the load's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import orjson

from chaos.workload import STRIPE_SECRET

GITHUB_SECRET = "chaos-github-secret"
#: The marker every poison body carries, so the scenario can find their rows.
MARKER = "poison"


def github_config() -> dict[str, object]:
    return {"scheme": "github", "secrets": [GITHUB_SECRET]}


def _stripe_headers(body: bytes) -> dict[str, str]:
    ts = int(time.time())
    mac = hmac.new(STRIPE_SECRET.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "Stripe-Signature": f"t={ts},v1={mac}"}


def _github_headers(body: bytes, delivery: str, event: str) -> dict[str, str]:
    mac = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Hub-Signature-256": f"sha256={mac}",
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Event": event,
    }


@dataclass
class PoisonRecord:
    """Every poison answer by kind (`0`: the connection closed without an answer)."""

    run: str
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    idle_sent: int = 0
    idle_closed: int = 0

    def add(self, kind: str, status: int, outcome: str = "") -> None:
        self.statuses.setdefault(kind, Counter())[status] += 1
        self.outcomes.setdefault(kind, Counter())[outcome] += 1

    def summary(self) -> str:
        lines = [f"poison {self.run}:"]
        for kind, statuses in sorted(self.statuses.items()):
            lines.append(f"  {kind:<13} {dict(statuses)} {dict(self.outcomes[kind])}")
        lines.append(f"  idle          {self.idle_closed}/{self.idle_sent} closed by the gateway")
        return "\n".join(lines)


class Poisoner:
    """Sends every kind of poison at one gateway, `rounds` times, spread over a load run."""

    def __init__(self, url: str, run: str, *, max_body_bytes: int, head_bytes: int) -> None:
        self.url = url
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.record = PoisonRecord(run)
        self.max_body_bytes = max_body_bytes
        self.head_bytes = head_bytes

    async def _post(
        self, kind: str, http: httpx.AsyncClient, path: str, body: bytes, headers: dict[str, str]
    ) -> None:
        try:
            response = await http.post(f"{self.url}{path}", content=body, headers=headers)
        except httpx.HTTPError:
            self.record.add(kind, 0)
            return
        try:
            doc = response.json()
            outcome = str(doc.get("status") or doc.get("error"))
        except ValueError:
            outcome = "unreadable"
        self.record.add(kind, response.status_code, outcome)

    async def round(self, http: httpx.AsyncClient, i: int) -> None:
        run = self.record.run
        big = orjson.dumps(
            {
                "id": f"evt_{run}_{MARKER}_big{i}",
                "type": "invoice.paid",
                "data": {"pad": "A" * self.max_body_bytes},
            }
        )
        await self._post("oversized", http, "/webhooks/stripe", big, _stripe_headers(big))
        nul = orjson.dumps(
            {
                "id": f"evt_{run}_{MARKER}_nul{i}",
                "type": "invoice.\u0000paid",
                "data": {"object": {"id": f"in_{run}_{i}"}},
            }
        )
        await self._post("nul_type", http, "/webhooks/stripe", nul, _stripe_headers(nul))
        broken = f'{{"id": "evt_{run}_{MARKER}_broken{i}", "type": "invoice.paid", '.encode()
        broken += b"\xff\xfe not json"
        await self._post("unparseable", http, "/webhooks/stripe", broken, _stripe_headers(broken))
        await self.flood_head()

    async def replays(self, http: httpx.AsyncClient, forged: int) -> None:
        """One genuine GitHub delivery, then its body under `forged` new ids and types."""
        run = self.record.run
        body = orjson.dumps(
            {
                "action": "created",
                "marker": MARKER,
                "run": run,
                "hook": {"id": 1},
                "zen": "Keep it logically awesome.",
            }
        )
        genuine = _github_headers(body, f"gh-{run}-genuine", "ping")
        await self._post("replay_genuine", http, "/webhooks/github", body, genuine)
        for k in range(forged):
            headers = _github_headers(body, f"gh-{run}-forged-{k}", "payment_intent.succeeded")
            await self._post("replay", http, "/webhooks/github", body, headers)

    async def flood_head(self) -> None:
        """A request head four times the limit, written as fast as the gateway reads."""
        status = 0
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            self.record.add("header_flood", 0, "connect_failed")
            return
        try:
            writer.write(b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nX-Junk: ")
            chunk = b"a" * 16384
            for _ in range(max(1, 4 * self.head_bytes // len(chunk))):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 10)
            writer.write(b"\r\nContent-Length: 2\r\n\r\n{}")
            await asyncio.wait_for(writer.drain(), 10)
            line = await asyncio.wait_for(reader.readline(), 10)
            if line.startswith(b"HTTP/1.1 "):
                status = int(line.split()[1])
        except (OSError, TimeoutError, ValueError):
            pass  # closed on us: the head was refused without an answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self.record.add("header_flood", status)

    async def hold_idle(self, n: int, hold_s: float) -> None:
        """Open `n` sockets (every other one sends half a head) and count how many the
        gateway has closed when `hold_s` has passed."""
        streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        for k in range(n):
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                continue
            if k % 2:
                writer.write(b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n")
            streams.append((reader, writer))
        self.record.idle_sent = len(streams)
        await asyncio.sleep(hold_s)

        async def closed(reader: asyncio.StreamReader) -> bool:
            try:
                await asyncio.wait_for(reader.read(), 0.5)  # EOF, after any 408
                return True
            except ConnectionError:
                return True  # reset: closed all the same
            except (TimeoutError, OSError):
                return False

        self.record.idle_closed = sum(await asyncio.gather(*(closed(r) for r, _ in streams)))
        for _, writer in streams:
            writer.close()
