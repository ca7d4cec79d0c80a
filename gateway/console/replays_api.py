"""The replays JSON API under /console/api/v1/replays: plan (`dry_run`) or create a job
(`Idempotency-Key` honoured), list jobs, read one with its counts and its items, and
pause, resume, cancel or retry it. Errors are problem+json."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.guard import by_method, needs
from gateway.console.replay_ops import (
    NotConfirmed,
    act,
    create_job,
    idempotency_key,
    item_doc,
    job_detail,
    job_doc,
    job_id_of,
    jobs_page,
    plan_of,
)
from gateway.console.web import Principal, problem, read_body
from gateway.core.console.roles import Capability, can
from gateway.core.replay.jobs import ItemState, JobAction, JobState
from gateway.core.replay.requests import ask_from_json
from gateway.errors import RowNotFound, UsageError


async def _body(request: Request) -> dict[str, Any] | Response:
    # At most `web.REPLAY_BODY_BYTES` on create (a job's ids), the console's cap elsewhere.
    raw = await read_body(request)
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        return problem(400, "Bad Request", "the body is not JSON")
    if not isinstance(body, dict):
        return problem(400, "Bad Request", "the body must be a JSON object")
    return body


def _why(exc: Exception, states: type[JobState] | type[ItemState]) -> str:
    if isinstance(exc, UsageError):
        return str(exc)
    return "state: one of " + ", ".join(s.value for s in states)


@needs(Capability.OPERATE)
async def create(request: Request, principal: Principal) -> Response:
    body = await _body(request)
    if isinstance(body, Response):
        return body
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        return problem(400, "Bad Request", "dry_run is true or false")
    confirm = body.get("confirm")
    if confirm is not None and (isinstance(confirm, bool) or not isinstance(confirm, int)):
        return problem(400, "Bad Request", "confirm: the row count, a whole number")
    try:
        ask = ask_from_json(body)
        if dry_run:
            return JSONResponse({"plan": (await plan_of(request, ask)).to_json()})
        key = idempotency_key(request.headers.get("idempotency-key"))
        job_id, created, _ = await create_job(
            request, principal, ask, key, None if confirm is None else str(confirm)
        )
    except NotConfirmed as exc:
        return problem(422, "Unprocessable Content", f'{exc}: send "confirm": {exc.count}')
    except RowNotFound as exc:
        return problem(404, "Not Found", str(exc))
    except UsageError as exc:
        return problem(400, "Bad Request", str(exc))
    return JSONResponse(
        {"job_id": job_id, "created": created},
        status_code=202,
        headers={"Location": f"/console/api/v1/replays/{job_id}"},
    )


@needs(Capability.VIEW)
async def list_jobs(request: Request, principal: Principal) -> Response:
    states: tuple[JobState, ...] = ()
    try:
        states = tuple(JobState(s) for s in request.query_params.getlist("state"))
        page = await jobs_page(request, request.query_params.get("cursor"), states)
    except (ValueError, UsageError) as exc:  # a state that is none, a cursor not ours
        return problem(400, "Bad Request", _why(exc, JobState))
    return JSONResponse(
        {"items": [job_doc(j, c) for j, c in page.jobs], "next_cursor": page.next_cursor}
    )


@needs(Capability.VIEW)
async def get_job(request: Request, principal: Principal) -> Response:
    job_id = job_id_of(request)
    if job_id is None:
        return problem(404, "Not Found", "no such replay job")
    detail = await job_detail(request, job_id)
    if detail is None:
        return problem(404, "Not Found", f"no replay job {job_id}")
    return JSONResponse(job_doc(detail.job, detail.counts))


@needs(Capability.VIEW)
async def job_items(request: Request, principal: Principal) -> Response:
    job_id = job_id_of(request)
    if job_id is None:
        return problem(404, "Not Found", "no such replay job")
    only_text = request.query_params.get("state")
    try:
        only = None if not only_text else ItemState(only_text)
        detail = await job_detail(request, job_id, request.query_params.get("cursor"), only)
    except (ValueError, UsageError) as exc:
        return problem(400, "Bad Request", _why(exc, ItemState))
    if detail is None:
        return problem(404, "Not Found", f"no replay job {job_id}")
    reads = can(principal.role, Capability.READ_PAYLOADS)
    return JSONResponse(
        {
            "items": [item_doc(i, reads_payloads=reads) for i in detail.items],
            "next_cursor": detail.next_cursor,
        }
    )


@needs(Capability.OPERATE)
async def action(request: Request, principal: Principal) -> Response:
    job_id = job_id_of(request)
    if job_id is None:
        return problem(404, "Not Found", "no such replay job")
    try:
        which = JobAction(request.path_params["action"])
    except ValueError:
        return problem(404, "Not Found", "actions: pause, resume, cancel, retry")
    job, applied = await act(request, principal, job_id, which)
    if job is None:
        return problem(404, "Not Found", f"no replay job {job_id}")
    if not applied:
        return problem(409, "Conflict", f"cannot {which.value} a job that is {job.state.value}")
    detail = await job_detail(request, job_id)
    if detail is None:  # cannot happen (jobs are never deleted), but say so if it does
        return problem(404, "Not Found", f"no replay job {job_id}")
    return JSONResponse(job_doc(detail.job, detail.counts))


@needs(Capability.VIEW)
async def no_such_path(request: Request, principal: Principal) -> Response:
    """Anything else under the replays API: problem+json, as every answer here is."""
    return problem(404, "Not Found", "no such replays resource: see the OpenAPI document")


API = "/console/api/v1/replays"
ROUTES: list[BaseRoute] = [
    # One route for both methods, so a 405 names both in `Allow`.
    Route(API, by_method(get=list_jobs, post=create), methods=["GET", "POST"]),
    Route(API + "/{job_id:int}", get_job, methods=["GET"]),
    Route(API + "/{job_id:int}/items", job_items, methods=["GET"]),
    Route(API + "/{job_id:int}/{action}", action, methods=["POST"]),
    Route(API + "/{rest:path}", no_such_path, methods=["GET", "POST"]),
]
