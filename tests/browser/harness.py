"""The console as an operator meets it, for the browser tests and the screenshots: a
migrated database with parked dead letters, tokens issued with the real CLI, and the real
`gateway console` and `gateway dlq run-jobs` processes on free ports.

The Stripe row is parked by the real gateway (a type outside the provider's
`event_types`), so replaying it with the fixed configuration runs the real `ingest`
handler end to end. The others are written the way the settlement worker parks a row,
with a real stack trace; one of them carries a hostile payload and message.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import subprocess
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson

from gateway.core.console.roles import Role
from tests.support import processes
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.processes import clean_env
from tests.support.services import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
CORPUS = Path(os.environ.get("GATEWAY_TEST_CORPUS", ROOT.parent / "shared" / "corpus"))
#: A real Stripe delivery (stripe-openapi's fixtures, in the shared corpus).
STRIPE_FIXTURE = "stripe-openapi/fixtures3.json#payment_intent.succeeded"

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE_EVENT = "evt_hostile_payload"
HOSTILE_PAYLOAD = orjson.dumps(
    {"id": HOSTILE_EVENT, "type": "charge.succeeded", "note": SCRIPT, "name": IMG}
)
#: Types the Stripe provider admits while the rows are parked; the fix drops the list.
NARROW_TYPES = ["charge.*"]


def chromium_args() -> list[str]:
    """Root (CI, containers) cannot use Chromium's user-namespace sandbox, and a
    container's small /dev/shm can crash its renderer."""
    args = ["--disable-dev-shm-usage"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    return args


def stripe_body() -> bytes:
    """The corpus's Stripe payment_intent.succeeded, byte for byte (a stand-in of the same
    shape where the corpus is not beside the repository)."""
    items = CORPUS / "items.jsonl.gz"
    if items.exists():
        with gzip.open(items, "rt", encoding="utf-8") as lines:
            for line in lines:
                item = orjson.loads(line)
                if item["name"] == STRIPE_FIXTURE:
                    return str(item["body"]).encode()
    return orjson.dumps(
        {
            "id": "evt_1L78EhKmLGUmNSHrXjmji7sZ",
            "object": "event",
            "type": "payment_intent.succeeded",
            "data": {"object": {"id": "pi_3L78EhKmLGUmNSHr0", "amount": 2000, "currency": "usd"}},
        }
    )


def a_stack(message: str) -> str:
    """A real Python traceback, as the worker stores one in `error_detail`."""
    try:
        raise LookupError(message)
    except LookupError as exc:
        return "".join(traceback.format_exception(exc))


@dataclass
class Seeded:
    """The rows a test finds again: ids and what the browser should show for them."""

    stripe_id: int
    stripe_event: str
    hostile_id: int
    other_ids: list[int] = field(default_factory=list)


async def park_settlement(
    conn: asyncpg.Connection,
    event_id: str,
    *,
    provider: str = "stripe",
    error_class: str = "UNKNOWN_MERCHANT",
    message: str | None = None,
    payload: bytes = b'{"id": "x"}',
    attempts: int = 3,
) -> int:
    """An open settlement dead letter, written as the worker writes one; its id."""
    message = message or f"no ledger account for merchant of {event_id}"
    row_id: int = await conn.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, subject, error_class,"
        " error_message, error_detail, payload, headers, attempts, received_at,"
        " first_failed_at, last_failed_at)"
        " VALUES ('settlement', $1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9,"
        " now() - interval '2 hours', now() - interval '2 hours', now() - interval '5 min')"
        " RETURNING id",
        provider,
        event_id,
        f"webhooks.{provider}.charge.succeeded",
        error_class,
        message,
        a_stack(message),
        payload,
        orjson.dumps(
            {"content-type": "application/json", "stripe-signature": "t=1,v1=abc"}
        ).decode(),
        attempts,
    )
    return row_id


async def seed(database_url: str, nats_url: str) -> Seeded:
    """Park the Stripe event through a real gateway and write the settlement rows."""
    doc = config(database_url, nats_url)
    doc["providers"]["stripe"]["event_types"] = NARROW_TYPES
    body = stripe_body()
    event_id = str(orjson.loads(body)["id"])
    async with running_server(doc) as server:
        d = deliver("stripe", event_id, body=body)
        answer = await server.client.post(d.path, content=d.body, headers=d.headers)
        assert answer.status_code == 200, answer.text
    conn = await asyncpg.connect(database_url)
    try:
        stripe_id = await conn.fetchval(
            "SELECT id FROM dlq_webhooks WHERE event_id = $1 AND stage = 'ingest'", event_id
        )
        assert stripe_id is not None, "the gateway did not park the Stripe event"
        hostile = await park_settlement(
            conn,
            HOSTILE_EVENT,
            message=f"merchant {SCRIPT} not found {IMG}",
            payload=HOSTILE_PAYLOAD,
        )
        others = [
            await park_settlement(conn, "evt_ledger_down", error_class="LEDGER_UNAVAILABLE"),
            await park_settlement(conn, "evt_gh_1", provider="github"),
        ]
    finally:
        await conn.close()
    return Seeded(stripe_id, event_id, hostile, others)


async def seed_many(database_url: str, count: int) -> None:
    """`count` more open settlement rows in one statement (the 10,000-row screenshots)."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, subject, error_class,"
            " error_message, error_detail, payload, headers, attempts, received_at,"
            " first_failed_at, last_failed_at)"
            " SELECT 'settlement', (ARRAY['stripe','github','shopify','paddle'])[1 + i % 4],"
            " 'evt_bulk_' || i, 'webhooks.stripe.charge.succeeded',"
            " (ARRAY['UNKNOWN_MERCHANT','LEDGER_UNAVAILABLE','CURRENCY_UNSUPPORTED'])[1 + i % 3],"
            " 'no ledger account for merchant m_' || (i % 97), $2, '{\"id\": \"x\"}'::bytea,"
            " '{}'::jsonb, 1 + i % 5, now() - i * interval '7 seconds',"
            " now() - i * interval '7 seconds', now() - i * interval '5 seconds'"
            " FROM generate_series(1, $1) AS i",
            count,
            a_stack("no ledger account for merchant m_1"),
        )
    finally:
        await conn.close()


# ---------------------------------------------------------------- the processes


def write_config(path: Path, database_url: str, nats_url: str, port: int, *, fixed: bool) -> Path:
    """The operator's config: before the fix, Stripe admits only NARROW_TYPES."""
    doc: dict[str, Any] = config(
        database_url, nats_url, console={"host": "127.0.0.1", "port": port}
    )
    if not fixed:
        doc["providers"]["stripe"]["event_types"] = NARROW_TYPES
    return write_toml(path, doc)


def issue_tokens(cfg: Path) -> dict[Role, str]:
    """One token per role, each printed alone on stdout by `gateway console token create`
    (the four commands run side by side: each one's start-up is most of its time)."""
    running = {
        role: subprocess.Popen(
            [
                GATEWAY,
                "console",
                "token",
                "create",
                "--name",
                role.value,
                "--role",
                role.value,
                "--config",
                str(cfg),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for role in Role
    }
    tokens: dict[Role, str] = {}
    for role, proc in running.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"gateway console token create ({role.value}): {err}"
        tokens[role] = out.strip()
    return tokens


@dataclass
class Process:
    """A gateway subcommand running in the background, its output in a log file."""

    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [GATEWAY, *self.args], stdout=out, stderr=subprocess.STDOUT, env=clean_env()
            )

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is None:
            return
        processes.stop(self.proc, 15)
        self.proc = None


def wait_serving(process: Process, url: str, timeout_s: float = 30.0) -> None:
    """Until `url` answers (any status), or fail with the process's output."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.proc is not None
        if process.proc.poll() is not None:
            raise AssertionError(f"gateway {process.args[0]} exited:\n{process.output()}")
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, timeout=2)
            return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout_s} s:\n{process.output()}")


@dataclass
class Console:
    """A running console: its origin, a token per role, the database behind it, and the
    replay runner, started when a test or a data set wants jobs to run."""

    origin: str
    tokens: Mapping[Role, str]
    database_url: str
    config: Path
    runner: Process

    def url(self, path: str) -> str:
        return self.origin + path

    def start_runner(self) -> None:
        """`gateway dlq run-jobs` with the fixed configuration (after the operator's fix)."""
        if self.runner.proc is None:
            self.runner.start()


@contextlib.contextmanager
def running_console(workdir: Path, database_url: str, nats_url: str) -> Iterator[Console]:
    """`gateway console` with the config before the fix; `Console.start_runner` starts
    `gateway dlq run-jobs` with the fixed one, as an operator runs it after the fix."""
    port = free_port()
    before = write_config(workdir / "console.toml", database_url, nats_url, port, fixed=False)
    after = write_config(workdir / "fixed.toml", database_url, nats_url, port, fixed=True)
    tokens = issue_tokens(before)
    console = Process(["console", "--config", str(before)], workdir / "console.log")
    runner = Process(["dlq", "run-jobs", "--config", str(after)], workdir / "run-jobs.log")
    try:
        console.start()
        origin = f"http://127.0.0.1:{port}"
        wait_serving(console, origin + "/console/login")
        yield Console(origin, tokens, database_url, before, runner)
    finally:
        runner.stop()
        console.stop()
