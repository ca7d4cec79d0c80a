"""Replays in the console against a real database (and NATS for events): the planner
shows the plan `--dry-run` would, a job created by the API or the form is run by the
runner of `gateway dlq run-jobs`, resolves its rows and shows who created it in the
audit; pause, resume, cancel and retry; a repeated Idempotency-Key gives the same job;
more than 100 rows are refused until the count is typed; a limit counts rows to replay,
as `gateway dlq replay --limit` does, and a filter matching more rows than one job takes
is refused with the cap.

The stage table's `settlement` handler records each row it is given (and fails the rows
it is told to), as in tests/integration/dlq/test_replay_jobs.py.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from gateway.console import replay_ops, replay_plans
from gateway.console.replay_ops import encode_cursor
from gateway.core.console.roles import Role
from gateway.core.dlq.model import DlqRow
from gateway.dlq import jobs as jobs_mod
from gateway.dlq import replay as replay_mod
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.replay import STAGE_HANDLERS
from gateway.errors import UnknownMerchant
from gateway.settings import Settings
from gateway.wiring import jobs as wiring_jobs
from tests.support.console import ConsoleHarness
from tests.support.openapi import check_answer
from tests.support.services import stream_messages


@dataclass
class Handler:
    calls: list[str] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)

    async def __call__(self, row: DlqRow) -> None:
        self.calls.append(row.event_id)
        if row.event_id in self.failing:
            raise UnknownMerchant(f"no merchant for {row.event_id}")


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Handler]:
    h = Handler()

    async def factory(ctx: ReplayContext) -> StageHandler:
        return h

    table: StageHandlers = {**STAGE_HANDLERS, "settlement": factory}
    monkeypatch.setattr(replay_mod, "STAGE_HANDLERS", table)
    yield h


async def park(
    console: ConsoleHarness, n: int, *, attempts: int = 1, stage: str = "settlement"
) -> list[int]:
    ids = []
    for i in range(n):
        ids.append(
            await console.fetchval(
                "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class,"
                " error_message, payload, received_at, attempts)"
                " VALUES ($1, 'stripe', $2, 'UNKNOWN_MERCHANT', 'x', '\\x7b7d',"
                " now() - interval '1 hour' + make_interval(secs => $3), $4) RETURNING id",
                stage,
                f"evt_{stage}_{i}",
                float(i),
                attempts,
            )
        )
    return ids


def with_nats(settings: Settings, nats_url: str) -> Settings:
    return dataclasses.replace(settings, nats=dataclasses.replace(settings.nats, url=nats_url))


async def run_jobs(console: ConsoleHarness, settings: Settings | None = None) -> int:
    """`gateway dlq run-jobs --once`, in this process, on the console's database."""
    options = jobs_mod.RunnerOptions(once=True, poll_s=0.05, heartbeat_s=0.1)
    return await wiring_jobs.run_jobs(settings or console.settings, options)


async def test_the_api_dry_run_is_the_plan_and_changes_nothing(console: ConsoleHarness) -> None:
    ids = await park(console, 3)
    await console.fetch("UPDATE dlq_webhooks SET attempts = 5 WHERE id = $1", ids[1])
    api = console.client(Role.OPERATOR)
    r = await api.post(
        "/console/api/v1/replays",
        json={"kind": "dlq", "filter": {"stage": ["settlement"]}, "dry_run": True},
    )
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert plan["would_replay"] == 2 and plan["skipped"] == 1
    assert [row["id"] for row in plan["first"]] == [ids[0], ids[2]]
    (passed,) = plan["passed_over"]
    assert passed["id"] == ids[1]
    assert passed["reason"] == "5 attempts reached --max-attempts 5; --force to include"
    assert plan["breakdown"] == [{"what": "settlement · UNKNOWN_MERCHANT · stripe", "rows": 2}]
    assert await console.fetchval("SELECT count(*) FROM replay_jobs") == 0


async def test_the_planner_page_shows_counts_rows_and_what_is_skipped(
    console: ConsoleHarness,
) -> None:
    ids = await park(console, 2)
    await park(console, 1, stage="ingest")
    await console.fetch(
        "UPDATE dlq_webhooks SET is_resolved = true, resolution = 'replayed' WHERE id = $1",
        ids[0],
    )
    browser = await console.session_client(Role.OPERATOR)
    r = await browser.get("/console/replays/new?state=any&stage=settlement")
    assert r.status_code == 200, r.text
    assert re.search(r"<strong>1</strong> row would replay", r.text)
    assert "already resolved (replayed)" in r.text
    assert "settlement · UNKNOWN_MERCHANT · stripe" in r.text
    assert 'name="idempotency_key"' in r.text
    assert "style=" not in r.text and "<script>" not in r.text
    # A filter the DLQ list would refuse is refused here with the same message.
    r = await browser.get("/console/replays/new?stage=nowhere")
    assert r.status_code == 400
    assert "unknown stage &#39;nowhere&#39;" in r.text


async def test_a_job_created_through_the_api_is_run_and_resolves_its_rows(
    console: ConsoleHarness, handler: Handler
) -> None:
    ids = await park(console, 3)
    api = console.client(Role.OPERATOR)
    r = await api.post("/console/api/v1/replays", json={"kind": "dlq", "ids": ids})
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    r = await api.get(f"/console/api/v1/replays/{job_id}")
    assert (r.json()["state"], r.json()["counts"]["pending"], r.json()["total"]) == (
        "planned",
        3,
        3,
    )
    assert await run_jobs(console) == 1
    doc = (await console.client(Role.VIEWER).get(f"/console/api/v1/replays/{job_id}")).json()
    assert doc["state"] == "done"
    assert doc["counts"] == {"pending": 0, "replayed": 3, "failed": 0, "skipped": 0}
    assert await console.fetchval("SELECT count(*) FROM dlq_webhooks WHERE is_resolved") == 3
    (audit,) = await console.audit("replay.create")
    assert (audit["actor"], audit["target"], audit["via"]) == (
        "console:operator",
        f"job:{job_id}",
        "bearer",
    )
    created_by = await console.fetchval("SELECT created_by FROM replay_jobs WHERE id = $1", job_id)
    assert created_by == "console:operator"


async def test_the_form_creates_one_job_per_idempotency_key_and_shows_its_progress(
    console: ConsoleHarness, handler: Handler
) -> None:
    await park(console, 2)
    browser = await console.session_client(Role.OPERATOR)
    form = {"kind": "dlq", "stage": "settlement", "idempotency_key": "k-1", "order": "key"}
    first = await browser.post("/console/replays", data=form)
    assert first.status_code == 303, first.text
    again = await browser.post("/console/replays", data=form)  # a double submit
    assert again.headers["location"] == first.headers["location"]
    assert await console.fetchval("SELECT count(*) FROM replay_jobs") == 1
    assert len(await console.audit("replay.create")) == 1
    page = await browser.get(first.headers["location"])
    assert page.status_code == 200
    assert '<progress id="job-progress-' in page.text and 'value="0" max="2"' in page.text
    assert "hx-get=" in page.text and ">Refresh</a>" in page.text  # live: polled, or by hand
    assert '<button type="submit">Pause</button>' in page.text
    await run_jobs(console)
    page = await browser.get(first.headers["location"])
    assert 'value="2" max="2"' in page.text and '<strong class="state state-done">done' in page.text
    assert "hx-get=" not in page.text  # finished: nothing left to poll
    listed = await browser.get("/console/replays")
    assert "console:operator" in listed.text and 'aria-label="Job ' in listed.text


async def test_more_than_100_rows_need_the_count_typed(console: ConsoleHarness) -> None:
    await park(console, 101)
    browser = await console.session_client(Role.OPERATOR)
    form = {"kind": "dlq", "stage": "settlement", "idempotency_key": "k-2"}
    planned = await browser.get("/console/replays/new?stage=settlement")
    assert 'name="confirm"' in planned.text and "Type the number of rows (101)" in planned.text
    refused = await browser.post("/console/replays", data=form)
    assert refused.status_code == 422
    assert "type 101 to confirm" in refused.text
    wrong = await browser.post("/console/replays", data={**form, "confirm": "100"})
    assert wrong.status_code == 422
    assert await console.fetchval("SELECT count(*) FROM replay_jobs") == 0
    api = console.client(Role.OPERATOR)
    r = await api.post("/console/api/v1/replays", json={"filter": {"stage": "settlement"}})
    assert r.status_code == 422 and '"confirm": 101' in r.json()["detail"]
    ok = await browser.post("/console/replays", data={**form, "confirm": "101"})
    assert ok.status_code == 303
    assert await console.fetchval("SELECT total FROM replay_jobs") == 101


async def test_a_limit_counts_rows_to_replay_and_every_row_passed_over_is_counted(
    console: ConsoleHarness,
) -> None:
    """As `gateway dlq replay --limit 2 --any --dry-run` plans it: the first two rows to
    replay, whatever is passed over between them, and every row passed over counted."""
    ids = await park(console, 6)
    await console.fetch("UPDATE dlq_webhooks SET attempts = 5 WHERE id = ANY($1)", [ids[1], ids[3]])
    await console.fetch(
        "UPDATE dlq_webhooks SET is_resolved = true, resolution = 'manual' WHERE id = $1", ids[5]
    )
    api = console.client(Role.OPERATOR)
    r = await api.post(
        "/console/api/v1/replays",
        json={
            "kind": "dlq",
            "filter": {"stage": ["settlement"], "state": ["any"]},
            "limit": 2,
            "dry_run": True,
        },
    )
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert (plan["would_replay"], plan["skipped"], plan["failed"]) == (2, 3, 0)
    assert [row["id"] for row in plan["first"]] == [ids[0], ids[2]]
    assert [row["id"] for row in plan["passed_over"]] == [ids[1], ids[3], ids[5]]


async def test_a_filter_matching_more_rows_than_a_job_takes_is_refused_with_the_cap(
    console: ConsoleHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_plans, "JOB_MAX_ROWS", 3)
    monkeypatch.setattr(replay_plans, "SKIPPED_SHOWN", 2)
    await park(console, 4)
    resolved = await park(console, 3, stage="publish")
    await console.fetch(
        "UPDATE dlq_webhooks SET is_resolved = true, resolution = 'manual' WHERE id = ANY($1)",
        resolved,
    )
    browser = await console.session_client(Role.OPERATOR)
    r = await browser.get("/console/replays/new?stage=settlement")
    assert r.status_code == 400
    assert "more than 3 rows match and would replay; one job replays at most 3" in r.text
    assert "narrow the filter, or set a limit" in r.text
    assert "Start replay" not in r.text
    r = await browser.get("/console/replays/new?state=any&limit=3")
    assert r.status_code == 200, r.text
    assert re.search(r"<strong>3</strong> rows would replay", r.text)
    assert "3 passed over (the first 2 listed below)." in r.text
    assert r.text.count("already resolved (manual)") == 2


async def test_the_idempotency_key_header_gives_the_same_job(console: ConsoleHarness) -> None:
    ids = await park(console, 1)
    api = console.client(Role.OPERATOR)
    body = {"kind": "dlq", "ids": ids}
    first = await api.post("/console/api/v1/replays", json=body, headers={"Idempotency-Key": "a"})
    second = await api.post("/console/api/v1/replays", json=body, headers={"Idempotency-Key": "a"})
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["job_id"] == second.json()["job_id"]
    assert (first.json()["created"], second.json()["created"]) == (True, False)
    # Another operator's key is theirs: the same text makes their own job.
    other = await console.client(Role.ADMIN).post(
        "/console/api/v1/replays", json=body, headers={"Idempotency-Key": "a"}
    )
    assert other.json()["job_id"] != first.json()["job_id"]


async def test_pause_resume_cancel_and_retry_through_the_api_and_the_forms(
    console: ConsoleHarness, handler: Handler
) -> None:
    ids = await park(console, 3)
    api = console.client(Role.OPERATOR)
    job_id = (await api.post("/console/api/v1/replays", json={"ids": ids})).json()["job_id"]
    r = await api.post(f"/console/api/v1/replays/{job_id}/pause")
    assert (r.status_code, r.json()["state"]) == (200, "paused")
    assert await run_jobs(console) == 0  # a paused job is not run
    r = await api.post(f"/console/api/v1/replays/{job_id}/pause")
    assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json"
    r = await api.post(f"/console/api/v1/replays/{job_id}/resume")
    assert r.json()["state"] == "planned"
    handler.failing = {"evt_settlement_1"}
    await run_jobs(console)
    doc = (await api.get(f"/console/api/v1/replays/{job_id}")).json()
    assert (doc["state"], doc["counts"]["failed"], doc["actions"]) == ("failed", 1, ["retry"])
    items = (await api.get(f"/console/api/v1/replays/{job_id}/items?state=failed")).json()
    (failed,) = items["items"]
    assert (failed["dlq_id"], failed["error_class"]) == (ids[1], "UNKNOWN_MERCHANT")
    handler.failing = set()
    browser = await console.session_client(Role.OPERATOR)
    r = await browser.post(f"/console/replays/{job_id}/retry")
    assert (r.status_code, r.headers["location"]) == (303, f"/console/replays/{job_id}")
    await run_jobs(console)
    doc = (await api.get(f"/console/api/v1/replays/{job_id}")).json()
    assert doc["state"] == "done" and doc["counts"]["replayed"] == 3
    assert (
        handler.calls.count("evt_settlement_1") == 2
        and handler.calls.count("evt_settlement_0") == 1
    )
    r = await browser.post(f"/console/replays/{job_id}/cancel")  # done: nothing to cancel
    assert r.headers["location"] == f"/console/replays/{job_id}?refused=cancel"
    actions = [
        (a["action"], a["outcome"])
        for a in await console.audit()
        if a["action"].startswith("replay.")
    ]
    assert actions == [
        ("replay.create", "ok"),
        ("replay.pause", "ok"),
        ("replay.pause", "refused"),
        ("replay.resume", "ok"),
        ("replay.retry", "ok"),
        ("replay.cancel", "refused"),
    ]


async def test_cancel_stops_a_planned_job_for_good(
    console: ConsoleHarness, handler: Handler
) -> None:
    ids = await park(console, 2)
    api = console.client(Role.OPERATOR)
    job_id = (await api.post("/console/api/v1/replays", json={"ids": ids})).json()["job_id"]
    assert (await api.post(f"/console/api/v1/replays/{job_id}/cancel")).json()[
        "state"
    ] == "cancelled"
    assert await run_jobs(console) == 0
    assert handler.calls == []
    assert (await api.post(f"/console/api/v1/replays/{job_id}/resume")).status_code == 409


async def test_the_jobs_list_pages_by_cursor(console: ConsoleHarness) -> None:
    ids = await park(console, 1)
    api = console.client(Role.OPERATOR)
    made = [
        (await api.post("/console/api/v1/replays", json={"ids": ids})).json()["job_id"]
        for _ in range(3)
    ]
    replay_ops_jobs = replay_ops.JOBS_PER_PAGE
    try:
        replay_ops.JOBS_PER_PAGE = 2
        first = (await api.get("/console/api/v1/replays")).json()
        assert [j["id"] for j in first["items"]] == made[::-1][:2]
        assert first["next_cursor"] == encode_cursor(made[1])
        rest = (await api.get(f"/console/api/v1/replays?cursor={first['next_cursor']}")).json()
        assert [j["id"] for j in rest["items"]] == [made[0]] and rest["next_cursor"] is None
    finally:
        replay_ops.JOBS_PER_PAGE = replay_ops_jobs
    assert (await api.get("/console/api/v1/replays?cursor=%%%")).status_code == 400


async def test_an_events_job_republishes_through_the_events_replay(
    console: ConsoleHarness, nats_url: str
) -> None:
    from gateway.wiring.schema import migrate_stream

    settings = with_nats(console.settings, nats_url)
    await migrate_stream(settings)
    ids = []
    for i, subject in enumerate(
        ["webhooks.stripe.invoice_paid", None, "webhooks.stripe.invoice_paid"]
    ):
        ids.append(
            await console.fetchval(
                "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
                " published_at) VALUES ('stripe', $1, 'invoice.paid', $2, '\\x7b7d', now())"
                " RETURNING id",
                f"evt_{i}",
                subject,
            )
        )
    api = console.client(Role.OPERATOR)
    plan = (
        await api.post(
            "/console/api/v1/replays",
            json={
                "kind": "events",
                "filter": {"provider": "stripe", "since": "1h"},
                "dry_run": True,
            },
        )
    ).json()["plan"]
    assert plan["would_replay"] == 2 and plan["passed_over"][0]["id"] == ids[1]
    r = await api.post(
        "/console/api/v1/replays",
        json={"kind": "events", "filter": {"provider": "stripe", "since": "1h"}},
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert await run_jobs(console, settings) == 1
    doc = (await api.get(f"/console/api/v1/replays/{job_id}")).json()
    assert doc["state"] == "done" and doc["counts"]["replayed"] == 2
    messages = await stream_messages(nats_url)
    assert sorted(h["Nats-Msg-Id"].split(":replay:")[0] for _, h, _ in messages) == [
        "stripe:evt_0",
        "stripe:evt_2",
    ]


async def test_the_api_answers_as_its_openapi_document_says(
    console: ConsoleHarness, handler: Handler
) -> None:
    ids = await park(console, 2)
    api = console.client(Role.OPERATOR)
    doc = (await api.get("/console/api/v1/openapi.json")).json()
    base = "/console/api/v1/replays"

    def check(template: str, method: str, r: httpx.Response) -> None:
        if r.status_code < 400:
            check_answer(doc, template, method, r.status_code, r.headers, r.content)
            return
        # Problems: documented, and a problem+json object (the checker reads it as text).
        assert str(r.status_code) in doc["paths"][template][method]["responses"]
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["status"] == r.status_code

    check(base, "post", await api.post(base, json={"ids": ids, "dry_run": True}))
    created = await api.post(base, json={"ids": ids}, headers={"Idempotency-Key": "doc"})
    check(base, "post", created)
    job_id = created.json()["job_id"]
    check(base, "post", await api.post(base, json={"ids": [999]}))  # 404
    check(base, "post", await api.post(base, json={"ids": "x"}))  # 400
    check(base, "get", await api.get(base))
    check(f"{base}/{{job_id}}", "get", await api.get(f"{base}/{job_id}"))
    check(f"{base}/{{job_id}}", "get", await api.get(f"{base}/999"))
    check(f"{base}/{{job_id}}/pause", "post", await api.post(f"{base}/{job_id}/pause"))
    check(f"{base}/{{job_id}}/pause", "post", await api.post(f"{base}/{job_id}/pause"))  # 409
    check(f"{base}/{{job_id}}/resume", "post", await api.post(f"{base}/{job_id}/resume"))
    await run_jobs(console)
    check(f"{base}/{{job_id}}", "get", await api.get(f"{base}/{job_id}"))
    check(f"{base}/{{job_id}}/items", "get", await api.get(f"{base}/{job_id}/items"))
    check(f"{base}/{{job_id}}/cancel", "post", await api.post(f"{base}/{job_id}/cancel"))
    viewer = console.client(Role.VIEWER)
    check(base, "post", await viewer.post(base, json={"ids": ids}))  # 403


async def test_a_job_page_says_when_it_waits_for_a_runner_or_its_runner_went_quiet(
    console: ConsoleHarness,
) -> None:
    ids = await park(console, 1)
    api = console.client(Role.OPERATOR)
    job_id = (await api.post("/console/api/v1/replays", json={"ids": ids})).json()["job_id"]
    viewer = await console.session_client(Role.VIEWER)
    page = await viewer.get(f"/console/replays/{job_id}")
    assert "Waiting for a runner" in page.text
    assert '<form method="post"' not in page.text.split("<main")[1]  # a viewer gets no buttons
    await console.fetch(
        "UPDATE replay_jobs SET state = 'running', runner = 'gone:1',"
        " heartbeat_at = now() - interval '1 minute' WHERE id = $1",
        job_id,
    )
    partial = await viewer.get(
        f"/console/replays/{job_id}?part=status", headers={"HX-Request": "true"}
    )
    assert partial.text.lstrip().startswith('<div id="job-status"')  # the fragment alone
    assert "no heartbeat for over 30 s" in partial.text


async def test_a_relative_time_is_pinned_when_planned_so_the_start_replays_what_was_shown(
    console: ConsoleHarness,
) -> None:
    await park(console, 1)
    browser = await console.session_client(Role.OPERATOR)
    page = await browser.get("/console/replays/new?stage=settlement&since=2h")
    (since,) = re.findall(r'<input type="hidden" name="since" value="([^"]+)">', page.text)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", since), since
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text))
    assert (await browser.post("/console/replays", data=form)).status_code == 303
    request = await console.fetchval("SELECT request::text FROM replay_jobs")
    assert f'"since": ["{since}"]' in request


async def test_the_events_planner_page_plans_the_event_logs_filter(
    console: ConsoleHarness,
) -> None:
    for i, subject in enumerate(["webhooks.stripe.invoice_paid", None]):
        await console.fetchval(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body)"
            " VALUES ('stripe', $1, 'invoice.paid', $2, '\\x7b7d') RETURNING id",
            f"evt_{i}",
            subject,
        )
    browser = await console.session_client(Role.OPERATOR)
    page = await browser.get("/console/replays/new?kind=events&provider=stripe&since=1h")
    assert page.status_code == 200, page.text
    assert re.search(r"<strong>1</strong> row would replay;", page.text)
    assert "no subject: the event was parked at ingest" in page.text
    assert "stripe · invoice.paid" in page.text
    assert 'name="max_attempts"' not in page.text  # a dead letter's option only
    refused = await browser.get("/console/replays/new?kind=events&since=1h&state=parked")
    assert refused.status_code == 400 and "remove state and contains" in refused.text


async def test_the_jobs_list_filters_by_state_and_a_job_says_which_rows_it_chose(
    console: ConsoleHarness,
) -> None:
    ids = await park(console, 2)
    api = console.client(Role.OPERATOR)
    by_id = (await api.post("/console/api/v1/replays", json={"ids": ids})).json()["job_id"]
    by_filter = (
        await api.post("/console/api/v1/replays", json={"filter": {"stage": "settlement"}})
    ).json()["job_id"]
    await api.post(f"/console/api/v1/replays/{by_id}/cancel")
    browser = await console.session_client(Role.VIEWER)
    cancelled = await browser.get("/console/replays?state=cancelled")
    assert f'href="/console/replays/{by_id}"' in cancelled.text
    assert f'href="/console/replays/{by_filter}"' not in cancelled.text
    assert (await browser.get("/console/replays?state=lost")).status_code == 400
    page = await browser.get(f"/console/replays/{by_id}")
    assert "<dd>2 by id</dd>" in page.text
    page = await browser.get(f"/console/replays/{by_filter}")
    assert "<dd>stage = settlement; state = open</dd>" in page.text  # as jsonb keeps them
