"""The framework's pieces that need no database: the principal's actor name, forms read
without python-multipart and never past the body cap, problem+json, and pages rendered
with the nav a role sees."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.console.app import on_refused
from gateway.console.web import (
    MAX_BODY_BYTES,
    REPLAY_BODY_BYTES,
    ConsoleDeps,
    Principal,
    Refused,
    body_cap,
    is_htmx,
    problem,
    read_form,
    render,
)
from gateway.core.console.roles import Role
from tests.support.console import console_settings

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_the_actor_is_console_and_the_name() -> None:
    assert Principal("alice", Role.VIEWER, "cookie").actor == "console:alice"


def test_a_problem_is_problem_json() -> None:
    r = problem(409, "Conflict", "taken")
    assert r.status_code == 409
    assert r.media_type == "application/problem+json"
    assert (
        bytes(r.body) == b'{"type":"about:blank","title":"Conflict","status":409,"detail":"taken"}'
    )


async def echo_form(request: Request) -> Response:
    form = await read_form(request)
    return JSONResponse({k: form.getlist(k) for k in form})


async def page(request: Request) -> Response:
    request.state.principal = Principal(
        request.query_params["who"], Role(request.query_params["role"]), "cookie"
    )
    return render(request, "forbidden.html", {"detail": "<b>x</b>", "needed": None}, no_store=True)


async def htmx(request: Request) -> Response:
    return JSONResponse({"htmx": is_htmx(request)})


def app() -> Starlette:
    made = Starlette(
        routes=[
            Route("/form", echo_form, methods=["POST"]),
            Route("/page", page),
            Route("/htmx", htmx),
        ],
        exception_handlers={Refused: on_refused},
    )
    made.state.deps = ConsoleDeps(
        pool=cast(Any, None), settings=console_settings("postgresql://127.0.0.1:1/x")
    )
    return made


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://t")


async def test_forms_are_read_without_multipart() -> None:
    async with client() as c:
        r = await c.post("/form", data={"a": ["1", "2"], "note": "x & y", "empty": ""})
        assert r.json() == {"a": ["1", "2"], "note": ["x & y"], "empty": [""]}
        r = await c.post("/form", json={"a": 1})
        assert r.json() == {}, "a body that is not a form reads as no fields"


async def test_pages_escape_and_show_the_nav_a_role_may_see() -> None:
    async with client() as c:
        r = await c.get("/page", params={"who": "<i>eve</i>", "role": "viewer"})
        assert r.headers["cache-control"] == "no-store"
        assert "&lt;b&gt;x&lt;/b&gt;" in r.text and "<b>x</b>" not in r.text
        assert "&lt;i&gt;eve&lt;/i&gt;" in r.text
        assert 'href="/console/dlq"' in r.text
        assert 'href="/console/tokens"' not in r.text, "tokens are for admins"
        r = await c.get("/page", params={"who": "root", "role": "admin"})
        assert 'href="/console/tokens"' in r.text
        assert '<form method="post" action="/console/logout">' in r.text


async def test_htmx_requests_are_told_apart() -> None:
    async with client() as c:
        assert (await c.get("/htmx", headers={"HX-Request": "true"})).json() == {"htmx": True}
        assert (await c.get("/htmx")).json() == {"htmx": False}


def test_the_body_cap_is_64_kib_but_for_a_replay_of_ids() -> None:
    assert body_cap("POST", "/console/login") == MAX_BODY_BYTES == 64 << 10
    assert body_cap("post", "/console/api/v1/replays") == REPLAY_BODY_BYTES
    assert body_cap("POST", "/console/api/v1/replays/1/pause") == MAX_BODY_BYTES
    assert body_cap("POST", "/console/replays") == MAX_BODY_BYTES, "the form's ids came in a URL"


async def test_a_form_past_the_cap_is_refused_declared_or_streamed() -> None:
    """`read_form` on its own (no middleware) refuses a body declared too large before
    reading it, and a chunked one as soon as it passes the cap."""
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(1000):
            pulled += 1
            yield b"a=" + b"x" * 1022

    async with client() as c:
        r = await c.post("/form", content=chunks(), headers={**FORM, "Content-Length": "10000000"})
        assert r.status_code == 413 and r.json()["title"] == "Payload Too Large"
        assert pulled == 0
        r = await c.post("/form", content=chunks(), headers=FORM)
        assert r.status_code == 413
        assert pulled == MAX_BODY_BYTES // 1024 + 1, "read no further than one chunk past the cap"
        r = await c.post("/form", content=b"a=" + b"x" * (MAX_BODY_BYTES - 2), headers=FORM)
        assert r.status_code == 200 and len(r.json()["a"][0]) == MAX_BODY_BYTES - 2
