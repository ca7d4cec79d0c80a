"""Alerts: the Prometheus rules under promtool, and the in-process alerts against a real
HTTP receiver and real DLQ rows, driven by an injected clock instead of 30 s sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest

from gateway.adapters.alert_webhook import AlertWebhook
from gateway.adapters.postgres import open_pool
from gateway.core.health.alerting import AlertSettings
from gateway.dlq.alerts import DlqAlerts, refresh_dlq_gauges, run_alerts
from gateway.metrics import Metrics
from gateway.settings import parse
from tests.support.cli import GATEWAY
from tests.support.config_file import with_urls
from tests.support.receiver import Receiver
from tests.support.services import wait_until

RULES_DIR = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
needs_promtool = pytest.mark.skipif(
    not Path(PROMTOOL).exists(),
    reason="promtool not installed (Debian package 'prometheus'; scripts/setup.sh installs it)",
)
T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
T = TypeVar("T")


# --- Prometheus rules -------------------------------------------------------------------


def promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


@needs_promtool
def test_rules_file_is_valid() -> None:
    """`promtool check rules` accepts every rule."""
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 16 rules found" in result.stdout


@needs_promtool
def test_each_rule_fires_and_stays_quiet() -> None:
    """`promtool test rules`: every rule fires past its threshold and is quiet below it."""
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    """The promtool tests cover each alert both ways (so no rule goes untested)."""
    yaml = pytest.importorskip("yaml")
    rules = yaml.safe_load((RULES_DIR / "alerts.yml").read_text(encoding="utf-8"))
    tests = yaml.safe_load((RULES_DIR / "alerts_test.yml").read_text(encoding="utf-8"))
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert names == {
        "GatewayDlqBurst",
        "GatewayDlqRowUnresolved",
        "GatewayRetryStorm",
        "GatewayOutboxLag",
        "GatewayConfirmBacklog",
        "GatewayLedgerCritical",
        "GatewayMerchantNegative",
        "GatewayBackfillRecoveredEvents",
        "GatewayBackfillPageSkipped",
        "GatewayOrderKeyHeldTooLong",
        "GatewayForwardLagging",
        "GatewayForwardParking",
        "GatewayDatabaseNotDurable",
        "GatewaySignatureFailures",
        "GatewayProviderSilent",
        "GatewayDependencyDown",
    }
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    assert firing == names and quiet == names


@needs_promtool
@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        (") > 10", ") > 20"),
        ("> 3600", "> 7200"),
        ("[1m])) > 50", "[1m])) > 100"),
        ("lag_seconds) > 300\n        for: 5m", "lag_seconds) > 300\n        for: 15m"),
        ("hold_seconds) > 900\n", "hold_seconds) > 1800\n"),
        ("hold_seconds) > 900\n        for: 5m", "hold_seconds) > 900\n        for: 10m"),
        ("offset 15m) > 0)", "offset 15m) > 5)"),
        ('{outcome="recovered"}[15m])) > 0', '{outcome="recovered"}[15m])) > 5'),
        ("pages_skipped_total[1h])) > 0", "pages_skipped_total[1h])) > 5"),
        ("pages_skipped_total offset 1h", "pages_skipped_total offset 5m"),
        (
            'durability{state!="synchronous"}) == 1\n        for: 5m',
            'durability{state!="synchronous"}) == 1\n        for: 3m',
        ),
        (
            'durability{state!="synchronous"}) == 1\n        for: 5m',
            'durability{state!="synchronous"}) == 1\n        for: 10m',
        ),
        ('{state!="synchronous"}', '{state!="at_risk"}'),
        ("[15m]))\n          ) > 0.5", "[15m]))\n          ) > 0.7"),
        ("[15m])) >= 5", "[15m])) >= 3"),
        ("[1d] offset 1h)) > 24", "[1d] offset 1h)) > 5000"),
        ("[1h])) == 0", "[1h])) < 200"),
        (
            "(gateway_dependency_up) == 0\n        for: 2m",
            "(gateway_dependency_up) == 0\n        for: 4m",
        ),
        (
            "(gateway_dependency_up) == 0\n        for: 2m",
            "(gateway_dependency_up) == 0\n        for: 0m",
        ),
    ],
)
def test_the_rule_tests_catch_a_wrong_threshold(tmp_path: Path, original: str, mutant: str) -> None:
    """A rule with a changed threshold fails the tests: they check the numbers."""
    rules = (RULES_DIR / "alerts.yml").read_text(encoding="utf-8")
    assert rules.count(original) == 1
    (tmp_path / "alerts.yml").write_text(rules.replace(original, mutant), encoding="utf-8")
    shutil.copy(RULES_DIR / "alerts_test.yml", tmp_path)
    assert promtool("test", "rules", "alerts_test.yml", cwd=tmp_path).returncode != 0


# --- in-process alerts ------------------------------------------------------------------


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with open_pool(database_url, max_size=6) as p:
        yield p


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


async def park(db: asyncpg.Connection, event_id: str, first_failed_at: datetime) -> int:
    row_id: int = await db.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, first_failed_at, last_failed_at)"
        " VALUES ('settlement', 'stripe', $1, 'UNKNOWN_MERCHANT', 'x', '\\x7b7d', $2, $2)"
        " RETURNING id",
        event_id,
        first_failed_at,
    )
    return row_id


def alerts(
    pool: asyncpg.Pool,
    receiver: Receiver,
    client: httpx.AsyncClient,
    metrics: Metrics | None = None,
    **settings: Any,
) -> DlqAlerts:
    config = AlertSettings(webhook_url=receiver.url, **settings)
    webhook = AlertWebhook(client, config.webhook_url, config.timeout_s)
    return DlqAlerts(pool, config, metrics or Metrics(), webhook, source="gw-test")


async def test_dlq_burst_notifies_once_per_episode_and_when_it_clears(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """11 rows in 5 minutes: one FIRING, silence while it holds, one RESOLVED after."""
    for i in range(11):
        await park(db, f"evt_{i}", T0 - timedelta(minutes=1))
    evaluator = alerts(pool, receiver, client)
    sent = await evaluator.evaluate(T0)
    assert [n.state.value for n in sent] == ["firing"]
    for step_s in (30, 60, 90, 120):  # the condition holds: no repeat every 30 s
        assert await evaluator.evaluate(T0 + timedelta(seconds=step_s)) == []
    assert await evaluator.evaluate(T0 + timedelta(minutes=5)) != []  # rows left the window
    assert await evaluator.evaluate(T0 + timedelta(minutes=5, seconds=30)) == []
    assert receiver.statuses() == [("dlq_burst", "", "firing"), ("dlq_burst", "", "resolved")]
    firing, resolved = receiver.received
    assert firing["value"] == 11 and firing["threshold"] == 10
    assert firing["text"].startswith("[FIRING] gateway dlq_burst: 11 rows parked in the DLQ")
    assert firing["source"] == "gw-test" and firing["resolved_at"] is None
    assert resolved["started_at"] == T0.isoformat()
    assert resolved["resolved_at"] == (T0 + timedelta(minutes=5)).isoformat()


async def test_stale_row_alert_and_its_resolution_by_the_operator(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """A row unresolved for over an hour fires; resolving it sends the resolved message."""
    row_id = await park(db, "evt_old", T0 - timedelta(minutes=59))
    await park(db, "evt_done", T0 - timedelta(hours=3))
    await db.execute("UPDATE dlq_webhooks SET is_resolved = true WHERE event_id = 'evt_done'")
    metrics = Metrics()
    evaluator = alerts(pool, receiver, client, metrics)
    assert await evaluator.evaluate(T0) == []
    assert metrics.dlq_unresolved.get() == 1
    assert metrics.dlq_oldest_unresolved_seconds.get() == 59 * 60
    await evaluator.evaluate(T0 + timedelta(minutes=2))
    assert receiver.statuses() == [("dlq_stale", "", "firing")]
    assert "oldest unresolved DLQ row is 3660 s old" in receiver.received[0]["summary"]
    await db.execute("UPDATE dlq_webhooks SET is_resolved = true WHERE id = $1", row_id)
    await evaluator.evaluate(T0 + timedelta(minutes=3))
    assert receiver.statuses()[-1] == ("dlq_stale", "", "resolved")
    assert metrics.dlq_unresolved.get() == 0
    assert "gateway_dlq_oldest_unresolved_seconds 0" in metrics.render()


async def test_retry_storm_per_subject(
    pool: asyncpg.Pool, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """More than 50 retries a minute on one subject fires for that subject only."""
    metrics = Metrics()
    evaluator = alerts(pool, receiver, client, metrics)
    busy, calm = "webhooks.stripe.charge_succeeded", "webhooks.paddle.transaction_completed"
    await evaluator.evaluate(T0)
    metrics.retries_total.inc(60, subject=busy)
    metrics.retries_total.inc(10, subject=calm)
    await evaluator.evaluate(T0 + timedelta(seconds=30))
    await evaluator.evaluate(T0 + timedelta(seconds=60))  # still 60 in the last minute
    assert receiver.statuses() == [("retry_storm", busy, "firing")]
    await evaluator.evaluate(T0 + timedelta(seconds=90))  # nothing new for a minute
    assert receiver.statuses()[-1] == ("retry_storm", busy, "resolved")


async def test_failed_delivery_is_retried_then_sent_once(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """A receiver error leaves the notice owed; the next evaluation delivers it, once."""
    for i in range(11):
        await park(db, f"evt_{i}", T0)
    receiver.fail_next = 1
    evaluator = alerts(pool, receiver, client)
    assert await evaluator.evaluate(T0) == []
    assert await db.fetchval("SELECT state FROM dlq_alert_state WHERE rule = 'dlq_burst'") in (
        None,
        "ok",
    )
    assert len(await evaluator.evaluate(T0 + timedelta(seconds=30))) == 1
    assert await evaluator.evaluate(T0 + timedelta(seconds=60)) == []
    assert receiver.statuses() == [("dlq_burst", "", "firing")]


async def test_several_processes_and_restarts_notify_once(
    database_url: str, db: asyncpg.Connection, receiver: Receiver
) -> None:
    """Gateways sharing the database send one notice per episode, restarted or not."""
    for i in range(11):
        await park(db, f"evt_{i}", T0)
    async with (
        open_pool(database_url, max_size=3) as pool_a,
        open_pool(database_url, max_size=3) as pool_b,
        httpx.AsyncClient() as client_a,
        httpx.AsyncClient() as client_b,
    ):
        a = alerts(pool_a, receiver, client_a)
        b = alerts(pool_b, receiver, client_b)
        await asyncio.gather(a.evaluate(T0), b.evaluate(T0))
        restarted = alerts(pool_a, receiver, client_a)
        await restarted.evaluate(T0 + timedelta(seconds=30))
    assert receiver.statuses() == [("dlq_burst", "", "firing")]


async def test_without_webhook_only_the_gauges_are_kept(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver
) -> None:
    """No webhook_url (so no receiver): gauges are refreshed, nothing is sent or stored."""
    await park(db, "evt_1", T0 - timedelta(minutes=10))
    metrics = Metrics()
    evaluator = DlqAlerts(pool, AlertSettings(), metrics, None)
    for i in range(20):
        await park(db, f"evt_burst_{i}", T0)
    assert await evaluator.evaluate(T0) == []
    assert receiver.received == []
    assert await db.fetchval("SELECT count(*) FROM dlq_alert_state") == 0
    assert metrics.dlq_unresolved.get() == 21
    assert await refresh_dlq_gauges(pool, metrics, now=T0) == (20, 600.0)


async def test_run_loop_evaluates_on_its_interval(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """`run` evaluates by itself (here every 50 ms) and survives a failing pass."""
    for i in range(11):
        await park(db, f"evt_{i}", T0)
    clock = iter([T0 - timedelta(days=400)] + [T0] * 1000)  # first pass: window empty
    evaluator = DlqAlerts(
        pool,
        AlertSettings(webhook_url=receiver.url, interval_s=0.05),
        Metrics(),
        AlertWebhook(client, receiver.url),
        clock=lambda: next(clock),
    )
    await evaluator.start()
    try:
        await wait_until(lambda: _async(len(receiver.received) == 1), timeout_s=10)
    finally:
        await evaluator.close()
    assert receiver.statuses() == [("dlq_burst", "", "firing")]


async def _async(value: T) -> T:
    return value


async def test_bad_alert_config_stops_with_the_key_named(tmp_path: Path) -> None:
    """`gateway settle` refuses a bad [alerts] table before doing anything."""
    config = tmp_path / "gateway.toml"
    urls = '[database]\nurl = "postgresql://127.0.0.1:1/x"\n[nats]\nurl = "nats://127.0.0.1:1"\n'
    config.write_text(urls + '[alerts]\nwebhook_url = "hooks.slack.com/services/T0/B0/XYZ"\n')
    done = subprocess.run(
        [GATEWAY, "settle", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "config error: alerts.webhook_url: must be an http:// or https:// URL" in done.stderr
    assert "XYZ" not in done.stderr + done.stdout


async def test_run_alerts_runs_until_cancelled(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """The coroutine the wiring starts sends alerts and stops cleanly when cancelled."""
    for i in range(11):
        await park(db, f"evt_{i}", datetime.now(UTC))
    doc = {"alerts": {"webhook_url": receiver.url, "interval_s": 0.05}}
    settings = parse(with_urls(doc), env={})
    webhook = AlertWebhook(client, receiver.url)
    task = asyncio.create_task(run_alerts(pool, settings.alerts, Metrics(), webhook))
    try:
        await wait_until(lambda: _async(receiver.received), timeout_s=10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert receiver.statuses() == [("dlq_burst", "", "firing")]
    assert not re.search("SECRET", receiver.received[0]["text"])


async def test_one_process_at_a_time_judges_and_names_its_thresholds(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """Issue 42 #12: two processes with different burst thresholds (10 and 20) and 15 rows
    parked flapped, one firing what the other resolved. The lease's holder alone judges:
    one FIRING naming the thresholds it used; the other takes over only once the holder
    lets go, and its notice names its own."""
    for i in range(15):
        await park(db, f"evt_{i}", T0 - timedelta(minutes=1))
    strict = alerts(pool, receiver, client, dlq_rows_max=10)
    lenient = alerts(pool, receiver, client, dlq_rows_max=20)
    for step_s in (0, 30, 60):
        await strict.evaluate(T0 + timedelta(seconds=step_s))
        await lenient.evaluate(T0 + timedelta(seconds=step_s))
    assert receiver.statuses() == [("dlq_burst", "", "firing")]
    firing = receiver.received[0]
    assert firing["settings"]["dlq_rows_max"] == 10
    assert firing["settings"]["digest"] and "webhook_url" not in firing["settings"]
    await strict.close()  # stopping: the lease is given up
    await lenient.evaluate(T0 + timedelta(seconds=90))
    assert receiver.statuses() == [("dlq_burst", "", "firing"), ("dlq_burst", "", "resolved")]
    resolved = receiver.received[1]
    assert resolved["settings"]["dlq_rows_max"] == 20
    assert resolved["settings"]["digest"] != firing["settings"]["digest"]


async def test_a_dependency_down_past_two_minutes_is_notified_and_resolved(
    pool: asyncpg.Pool, db: asyncpg.Connection, receiver: Receiver, client: httpx.AsyncClient
) -> None:
    """Issue 42 #12: the currency-service recorded down (as `gateway settle` records it)
    is notified once past 2 minutes, and resolved once a process records it up."""
    await db.execute(
        "INSERT INTO dependency_state (dependency, state, since, checked_at, checked_by,"
        " error_class) VALUES ('currency-service', 'down', $1, $1, 'settle@h:1',"
        " 'RATE_SERVICE_UNAVAILABLE')",
        T0,
    )
    evaluator = alerts(pool, receiver, client)
    assert await evaluator.evaluate(T0 + timedelta(seconds=60)) == []
    await evaluator.evaluate(T0 + timedelta(seconds=150))
    await db.execute(
        "UPDATE dependency_state SET state = 'up', since = $1, checked_at = $1",
        T0 + timedelta(minutes=3),
    )
    await evaluator.evaluate(T0 + timedelta(minutes=4))
    assert receiver.statuses() == [
        ("dependency_down", "currency-service", "firing"),
        ("dependency_down", "currency-service", "resolved"),
    ]
    assert receiver.received[0]["text"].startswith(
        "[FIRING] gateway dependency_down: currency-service has been down for 150 s"
    )
