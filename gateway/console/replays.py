"""Replays: the planner (`/console/replays/new`, the plan `--dry-run` prints, made by
the same planner), starting a job (audited), the jobs list and a job's page with its
progress, its items' results and pause, resume, cancel and "retry failed items". Jobs
are run by `gateway dlq run-jobs`, not by this process. JSON in `replays_api`.

Every page works without JavaScript: the planner is a GET form, each action a POST form
that redirects back; htmx only refreshes a running job's status every 2 s.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console import replays_api
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
from gateway.console.replay_plans import filter_summary
from gateway.console.web import Principal, form_value, is_htmx, read_form, render
from gateway.core.console.roles import Capability, can
from gateway.core.replay.jobs import (
    CONFIRM_ABOVE_ROWS,
    FINISHED,
    STALE_AFTER_S,
    ItemState,
    JobAction,
    JobState,
    is_stale,
)
from gateway.core.replay.requests import ask_from_params
from gateway.errors import RowNotFound, UsageError


def query_params(request: Request) -> dict[str, list[str]]:
    """Every value of every name (filters repeat)."""
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    return params


def _options(params: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The options as typed, to fill the form in again."""

    def last(name: str, default: str = "") -> str:
        values = [v for v in params.get(name, ()) if v.strip()]
        return values[-1].strip() if values else default

    return {
        "limit": last("limit"),
        "rate": last("rate"),
        "max_attempts": last("max_attempts", "5"),
        "order": last("order", "key"),
        "force": last("force"),
    }


async def _planner(
    request: Request,
    params: Mapping[str, Sequence[str]],
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    context: dict[str, Any] = {
        "error": error,
        "plan": None,
        "hidden": [],
        "by_ids": False,
        "summary": [],
        "kind": (list(params.get("kind", ())) or ["dlq"])[-1],
        "options": _options(params),
        # A fresh key per page drawn: submitting this form twice makes one job.
        "idempotency_key": uuid.uuid4().hex,
        "confirm_above": CONFIRM_ABOVE_ROWS,
    }
    try:
        ask = ask_from_params(params)
        context["by_ids"] = bool(ask.ids)
        context["kind"] = ask.kind.value
        context["summary"] = filter_summary(ask)  # as typed, until the plan is made
        view = await plan_of(request, ask)
        # The filter as read, times absolute: the start replays the rows shown here.
        context["plan"] = view
        context["hidden"] = view.ask.hidden_fields()
        context["summary"] = filter_summary(view.ask)
    except (UsageError, RowNotFound) as exc:
        context["error"] = error or str(exc)
        status = status if status != 200 else 400
    return render(request, "replays/new.html", context, status=status)


@needs(Capability.OPERATE)
async def planner_page(request: Request, principal: Principal) -> Response:
    return await _planner(request, query_params(request))


@needs(Capability.OPERATE)
async def create_from_form(request: Request, principal: Principal) -> Response:
    form = await read_form(request)
    params = {k: [v for v in form.getlist(k) if isinstance(v, str)] for k in form}
    try:
        ask = ask_from_params(params)
        key = idempotency_key(form_value(form, "idempotency_key"))
        job_id, _, _ = await create_job(request, principal, ask, key, form_value(form, "confirm"))
    except NotConfirmed as exc:
        return await _planner(request, params, error=str(exc), status=422)
    except (UsageError, RowNotFound) as exc:
        return await _planner(request, params, error=str(exc), status=400)
    return RedirectResponse(f"/console/replays/{job_id}", status_code=303)


@needs(Capability.VIEW)
async def jobs_list(request: Request, principal: Principal) -> Response:
    state = request.query_params.get("state") or ""
    context: dict[str, Any] = {
        "jobs": [],
        "next_cursor": None,
        "error": None,
        "state": state,
        "states": [s.value for s in JobState],
        "can_operate": can(principal.role, Capability.OPERATE),
    }
    try:
        if state and state not in context["states"]:
            raise UsageError(f"state: {state!r} is not one of {', '.join(context['states'])}")
        chosen = (JobState(state),) if state else ()
        page = await jobs_page(request, request.query_params.get("cursor"), chosen)
    except UsageError as exc:
        context["error"] = str(exc)
        return render(request, "replays/list.html", context, status=400)
    context["jobs"] = [job_doc(job, counts) for job, counts in page.jobs]
    context["next_cursor"] = page.next_cursor
    return render(request, "replays/list.html", context)


ACTION_LABELS = {
    JobAction.PAUSE: "Pause",
    JobAction.RESUME: "Resume",
    JobAction.CANCEL: "Cancel",
    JobAction.RETRY: "Retry failed items",
}


@needs(Capability.VIEW)
async def job_page(request: Request, principal: Principal) -> Response:
    job_id = job_id_of(request)
    if job_id is None:
        return render(request, "replays/missing.html", {"detail": "no such job"}, status=404)
    only_text = request.query_params.get("items") or None
    try:
        only = None if only_text is None else ItemState(only_text)
        detail = await job_detail(request, job_id, request.query_params.get("cursor"), only)
    except (ValueError, UsageError) as exc:
        message = str(exc) if isinstance(exc, UsageError) else "items: not an item state"
        return render(request, "replays/missing.html", {"detail": message}, status=400)
    if detail is None:
        return render(
            request, "replays/missing.html", {"detail": f"no replay job {job_id}"}, status=404
        )
    refused = request.query_params.get("refused")
    context = {
        "job": job_doc(detail.job, detail.counts),
        "items": [
            item_doc(i, reads_payloads=can(principal.role, Capability.READ_PAYLOADS))
            for i in detail.items
        ],
        "next_cursor": detail.next_cursor,
        "only": only_text,
        "item_states": [s.value for s in ItemState],
        "live": detail.job.state not in FINISHED,
        "can_operate": can(principal.role, Capability.OPERATE),
        "labels": {a.value: label for a, label in ACTION_LABELS.items()},
        "refused": refused if refused in {a.value for a in JobAction} else None,
        # A running job whose runner went quiet is taken over by the next runner.
        "stale_after_s": int(STALE_AFTER_S),
        "runner_quiet": detail.job.state is JobState.RUNNING
        and is_stale(detail.job.heartbeat_at, detail.now, STALE_AFTER_S),
    }
    if is_htmx(request) and request.query_params.get("part") == "status":
        return render(request, "replays/_status.html", context)
    return render(request, "replays/detail.html", context)


@needs(Capability.OPERATE)
async def action_from_form(request: Request, principal: Principal) -> Response:
    job_id = job_id_of(request)
    if job_id is None:
        return render(request, "replays/missing.html", {"detail": "no such job"}, status=404)
    try:
        action = JobAction(request.path_params["action"])
    except ValueError:
        return render(request, "replays/missing.html", {"detail": "no such action"}, status=404)
    job, applied = await act(request, principal, job_id, action)
    if job is None:
        return render(
            request, "replays/missing.html", {"detail": f"no replay job {job_id}"}, status=404
        )
    back = f"/console/replays/{job_id}" + ("" if applied else f"?refused={action.value}")
    return RedirectResponse(back, status_code=303)


ROUTES: list[BaseRoute] = [
    # One route for both methods, so a 405 names both in `Allow`.
    Route(
        "/console/replays", by_method(get=jobs_list, post=create_from_form), methods=["GET", "POST"]
    ),
    Route("/console/replays/new", planner_page, methods=["GET"]),
    Route("/console/replays/{job_id:int}", job_page, methods=["GET"]),
    Route("/console/replays/{job_id:int}/{action}", action_from_form, methods=["POST"]),
    *replays_api.ROUTES,
]
