"""Route x role for replays: every role may see the jobs and their progress; only an
operator (or admin) may plan a replay, start one, or pause, resume, cancel and retry
a job; a refused request answers 403 and makes or changes no job."""

from __future__ import annotations

import pytest

from gateway.adapters.postgres import replay_jobs as store
from gateway.adapters.postgres import transaction
from gateway.core.console.roles import CAPABILITIES, Role
from gateway.core.replay.jobs import JobKind, NewJob
from tests.support.console import Case, ConsoleHarness, check_case

API = "/console/api/v1/replays"
CASES: list[Case] = [
    ("GET", "/console/replays", Role.VIEWER, None),
    ("GET", "/console/replays/1", Role.VIEWER, None),
    ("GET", "/console/replays/1?items=pending", Role.VIEWER, None),
    ("GET", "/console/replays/new?stage=settlement", Role.OPERATOR, None),
    ("GET", "/console/replays/new?kind=dlq&id=1", Role.OPERATOR, None),
    (
        "POST",
        "/console/replays",
        Role.OPERATOR,
        {"kind": "dlq", "stage": "settlement", "idempotency_key": "roles"},
    ),
    ("POST", "/console/replays/1/pause", Role.OPERATOR, None),
    ("POST", "/console/replays/1/resume", Role.OPERATOR, None),
    ("POST", "/console/replays/1/cancel", Role.OPERATOR, None),
    ("POST", "/console/replays/1/retry", Role.OPERATOR, None),
    ("GET", API, Role.VIEWER, None),
    ("GET", f"{API}/1", Role.VIEWER, None),
    ("GET", f"{API}/1/items", Role.VIEWER, None),
    ("POST", API, Role.OPERATOR, {"kind": "dlq", "ids": [1, 2]}),
    ("POST", API, Role.OPERATOR, {"kind": "dlq", "ids": [1], "dry_run": True}),
    ("POST", f"{API}/1/pause", Role.OPERATOR, None),
    ("POST", f"{API}/1/resume", Role.OPERATOR, None),
    ("POST", f"{API}/1/cancel", Role.OPERATOR, None),
    ("POST", f"{API}/1/retry", Role.OPERATOR, None),
    ("GET", f"{API}/not-a-job", Role.VIEWER, None),
    ("POST", f"{API}/not-a-job/pause", Role.VIEWER, None),
]


async def seed(console: ConsoleHarness) -> None:
    """Dead letters 1 and 2, and job 1 replaying them (planned)."""
    for n in (1, 2):
        await console.fetchval(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
            " payload) VALUES ('settlement', 'stripe', $1, 'UNKNOWN_MERCHANT', 'x', '\\x7b7d')"
            " RETURNING id",
            f"evt_{n}",
        )
    async with transaction(console.pool) as conn:
        job_id, _ = await store.create_job(
            conn, NewJob(JobKind.DLQ, "console:someone", {"ids": [1, 2]}, (1, 2))
        )
    assert job_id == 1


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p} {b}" for m, p, _, b in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    await seed(console)
    jobs_before = await console.fetchval("SELECT count(*) FROM replay_jobs")
    r = await check_case(console, case, role)
    method, path, least, body = case
    jobs = await console.fetchval("SELECT count(*) FROM replay_jobs")
    allowed = CAPABILITIES[least] <= CAPABILITIES[role]
    creates = method == "POST" and path.split("?")[0] in ("/console/replays", API)
    if not allowed:
        assert jobs == jobs_before
        return
    if "not-a-job" in path:
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    elif method == "GET" or (body or {}).get("dry_run"):
        assert r.status_code == 200, r.text
        assert jobs == jobs_before
    elif creates:
        assert r.status_code in (202, 303), r.text
        assert jobs == jobs_before + 1
    else:  # an action: applied, or refused because of the job's state (resume, retry)
        assert r.status_code in (200, 303, 409), r.text
