"""What every console route module codes against: who is asking (`Principal`), the
console's dependencies (`ConsoleDeps`), the capability check (`require`; routes declare
theirs with `console.guard`), the audit rows (`audit`, `audit_anonymous`), and the ways
to answer (`render`, `problem`).

Authentication itself (cookie sessions, bearer tokens, trusted proxy headers), the
cross-site check and the security headers are in `gateway.console.auth`; it leaves the
principal (or None) on `request.state.principal` before any route runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import jinja2
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from gateway.adapters.http_answers import read_stream_capped
from gateway.adapters.postgres import Conn, Pool, transaction
from gateway.adapters.postgres.console.audit import record, record_for
from gateway.console import display
from gateway.core.console.access import LoginThrottle, console_origin
from gateway.core.console.audit_values import AnonymousSampler, bounded_text
from gateway.core.console.roles import Capability, Role, can, least_role
from gateway.core.finance.view import Books
from gateway.settings import Settings

__all__ = [
    "ConsoleDeps",
    "Principal",
    "Refused",
    "audit",
    "client_address",
    "deps",
    "is_api",
    "is_htmx",
    "make_templates",
    "principal_of",
    "problem",
    "read_body",
    "read_form",
    "render",
    "requested",
    "require",
]

PROBLEM_JSON = "application/problem+json"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Someone authenticated: a token's name (by cookie session or bearer), or a user a
    trusted SSO proxy named."""

    name: str
    role: Role
    via: str  # "cookie" | "bearer" | "proxy"
    token_id: int | None = None

    @property
    def actor(self) -> str:
        """How the audit trail and resolved rows name them."""
        return f"console:{self.name}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def make_templates() -> jinja2.Environment:
    """The console's templates, from the package; autoescaped (payloads are hostile)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gateway.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(display.FILTERS)  # one time and one id format on every page
    return env


@dataclass
class ConsoleDeps:
    """What routes reach through `deps(request)`."""

    pool: Pool
    #: The whole settings, not a section: the routes read `[console]`, `[settlement]`,
    #: `[nats]`, `[alerts]`, the providers and the services.
    settings: Settings
    #: The current time, UTC (tests pass a clock they move).
    now: Callable[[], datetime] = _utc_now
    templates: jinja2.Environment = field(default_factory=make_templates)
    #: A JetStream connection for the overview's consumer pending count; None if the
    #: console runs without one.
    nats: Any = None
    #: Failed logins per address and token (in this process's memory).
    throttle: LoginThrottle | None = None
    #: Failed bearer tokens per address and token (in this process's memory).
    bearer_throttle: LoginThrottle | None = None
    #: Which unauthenticated refusals are audited (in this process's memory).
    sampler: AnonymousSampler | None = None
    #: The configured ledger, for the ledger pages' balances and adjustments; None if
    #: the console runs without one (those parts say so).
    books: Books | None = None

    def __post_init__(self) -> None:
        if self.throttle is None:
            self.throttle = LoginThrottle(limit=self.settings.console.login_failures_per_min)
        if self.bearer_throttle is None:
            limit = self.settings.console.bearer_failures_per_min
            self.bearer_throttle = LoginThrottle(limit=limit)
        if self.sampler is None:
            self.sampler = AnonymousSampler()

    @property
    def origin(self) -> str:
        """The console's origin as browsers see it."""
        c = self.settings.console
        return console_origin(c.public_origin, c.host, c.port)


class Refused(Exception):
    """The request may not go on: 401 (not authenticated) or 403 (lacks a capability).
    The app's handler answers it as HTML or problem+json."""

    def __init__(self, status: int, detail: str = "", needed: Role | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.needed = needed


def deps(request: Request) -> ConsoleDeps:
    found: ConsoleDeps = request.app.state.deps
    return found


def principal_of(request: Request) -> Principal | None:
    """Who is asking, or None (set by the authentication middleware)."""
    return getattr(request.state, "principal", None)


def client_address(request: Request) -> str:
    """The peer's address (the proxy's, behind a proxy: forwarded-for is not trusted)."""
    return request.client.host if request.client else "unknown"


def is_htmx(request: Request) -> bool:
    """Whether htmx sent this (answer a partial template)."""
    return request.headers.get("hx-request", "").lower() == "true"


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/console/api/")


async def require(request: Request, cap: Capability) -> Principal:
    """The principal if it holds `cap`. Otherwise raises `Refused`: 401 without a live
    session or token, 403 (after an audit row "forbidden") without the capability.
    Routes declare their capability with `guard.needs`, which calls this; a handler calls
    it itself only for what a request asks beyond that (a search by body)."""
    principal = principal_of(request)
    if principal is None:
        raise Refused(401, "log in, or send a valid bearer token")
    if can(principal.role, cap):
        return principal
    needed = least_role(cap)
    detail = {"capability": str(cap), "needs": str(needed)}
    await audit(request, principal, "forbidden", requested(request), "refused", detail)
    raise Refused(403, f"this needs the {needed} role or higher", needed)


def requested(request: Request) -> str:
    """A refusal's audit target: the method and path asked for."""
    return f"{request.method} {request.url.path}"


async def audit(
    request: Request,
    principal: Principal,
    action: str,
    target: str | None,
    outcome: str = "ok",
    detail: Mapping[str, Any] | None = None,
    *,
    conn: Conn | None = None,
) -> None:
    """The audit row of what `principal` did, from the request's address. Pass `conn`
    when the row must commit with the change it records (a failed audit write then
    refuses the change); without it, the row is written in a transaction of its own."""
    address = client_address(request)
    if conn is not None:
        await record_for(conn, principal, address, action, target, outcome, detail)
        return
    async with transaction(deps(request).pool) as own:
        await record_for(own, principal, address, action, target, outcome, detail)


async def audit_anonymous(
    request: Request, action: str, outcome: str, detail: Mapping[str, Any] | None = None
) -> None:
    """An audit row for a request without a principal (failed logins, refusals): one per
    address, action and minute, saying how many of them were left out before it
    (`core.console.audit_values.AnonymousSampler`); the ones left out are logged."""
    address = client_address(request)
    console = deps(request)
    assert console.sampler is not None  # set in __post_init__
    left_out = console.sampler.admit(address, action, console.now().timestamp())
    if left_out is None:
        log.info("anonymous refusal not recorded again this minute",
                 extra={"action": action, "address": bounded_text(address)})  # fmt: skip
        return
    if left_out:
        detail = {**(detail or {}), "left_out_before": left_out}
    async with transaction(console.pool) as conn:
        await record(
            conn,
            actor=address,
            role=None,
            via="anonymous",
            address=address,
            action=action,
            target=requested(request),
            outcome=outcome,
            detail=detail,
        )


#: The navigation: (label, path, capability needed to see the link).
NAV: tuple[tuple[str, str, Capability], ...] = (
    ("Overview", "/console/", Capability.VIEW),
    ("Dead letters", "/console/dlq", Capability.VIEW),
    ("Replays", "/console/replays", Capability.VIEW),
    ("Events", "/console/events", Capability.VIEW),
    ("Held keys", "/console/keys", Capability.VIEW),
    ("Ledger", "/console/ledger", Capability.VIEW),
    ("Audit", "/console/audit", Capability.VIEW),
    ("Tokens", "/console/tokens", Capability.ADMINISTER),
)


def nav_for(request: Request) -> list[dict[str, Any]]:
    principal = principal_of(request)
    if principal is None:
        return []
    path = request.url.path
    items = []
    for label, href, cap in NAV:
        if not can(principal.role, cap):
            continue
        current = path == href if href == "/console/" else path.startswith(href)
        items.append({"label": label, "href": href, "current": current})
    return items


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    no_store: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A page (or, for htmx, a partial) from `template`. `no_store=True` on every page
    that shows a payload or header value, so no cache keeps it."""
    env = deps(request).templates
    full: dict[str, Any] = {
        "request": request,
        "principal": principal_of(request),
        "nav": nav_for(request),
        "htmx": is_htmx(request),
    }
    full.update(context or {})
    body = env.get_template(template).render(full)
    response = HTMLResponse(body, status_code=status, headers=dict(headers or {}))
    if no_store:
        response.headers["Cache-Control"] = "no-store"
    return response


def problem(
    status: int, title: str, detail: str = "", headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An `application/problem+json` error (RFC 9457)."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


#: The most bytes of a request body the console reads, on every route but those in
#: `LARGER_BODIES`. The largest legitimate body is a bulk resolve by ids: at most
#: `dead_letters.BULK_MAX_ROWS` (1,000) `id=` fields of up to 19 digits (23,000 bytes),
#: a note of `MAX_NOTE_CHARS` (2,000) 4-byte characters, percent-encoded (24,000 bytes),
#: and the filter's fields (a 200-character search: 2,400 bytes): 49,436 bytes at most
#: (tests/integration/console/test_body_limit.py sends it), a quarter of the cap to
#: spare. Every other form or JSON body is a few KB: a login, a token, a note, a key
#: release, a replay form (its ids are a list page's selection, at most 500); the
#: largest of them, a ledger adjustment with a reason and a note of 2,000 4-byte
#: characters each and ids of 200, is 53,000 bytes percent-encoded.
MAX_BODY_BYTES = 64 << 10
#: A replay's ids in the API's JSON: up to `JOB_MAX_ROWS` (100,000) ids of up to 19
#: digits, each with its separator: 2.1 MB compact, 2.9 MB indented by four; 4 MiB
#: leaves 1.2 MB to spare. Only an operator's body is read (the route refuses every
#: other principal before reading), never a stranger's.
REPLAY_BODY_BYTES = 4 << 20
#: (method, path) of the routes whose bodies may be larger than `MAX_BODY_BYTES`.
LARGER_BODIES: Mapping[tuple[str, str], int] = {
    ("POST", "/console/api/v1/replays"): REPLAY_BODY_BYTES,
}


def body_cap(method: str, path: str) -> int:
    """The most bytes of body the console reads for `method` on `path`."""
    return LARGER_BODIES.get((method.upper(), path), MAX_BODY_BYTES)


def too_large(max_bytes: int) -> Refused:
    """The refusal of a body past `max_bytes` (answered 413)."""
    return Refused(413, f"the console reads bodies of at most {max_bytes:,} bytes")


async def read_body(request: Request) -> bytes:
    """The request's body, at most `body_cap` bytes: refused (`Refused(413)`) before
    reading when Content-Length says more, and as soon as the bytes read pass it, so
    an oversized body is never held whole. Every body the console reads comes through
    here (and `body_limit.CountedBody` counts them again, for any read that would not)."""
    max_bytes = body_cap(request.method, request.url.path)
    declared = request.headers.get("content-length", "")
    return await read_stream_capped(
        declared, request.stream(), max_bytes, lambda _: too_large(max_bytes)
    )


async def read_form(request: Request) -> FormData:
    """The posted form fields (`application/x-www-form-urlencoded`, what the console's
    forms send; other bodies read as empty). Use this, not `request.form()`, which needs
    python-multipart, a dependency the console does without. Raises `Refused(413)` past
    `body_cap`."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await read_body(request)
    if kind != "application/x-www-form-urlencoded":
        return FormData()
    text = body.decode("utf-8", errors="replace")
    fields: list[tuple[str, str | UploadFile]] = list(
        parse_qsl(text, keep_blank_values=True, max_num_fields=10_000)
    )
    return FormData(fields)


def form_value(form: Mapping[str, Any], key: str, default: str = "") -> str:
    """A form field as text (an upload or a missing field counts as `default`)."""
    value = form.get(key, default)
    return value if isinstance(value, str) else default
