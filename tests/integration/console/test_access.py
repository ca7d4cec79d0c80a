"""Getting into the console and what guards it, against a real PostgreSQL: logging in
and out, the session cookie, idle and maximum expiry, the login throttle, the
cross-site check, trusted proxy headers, bearer tokens, the security headers, and the
audit trail being insert-only."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.core.console.access import sha256
from gateway.core.console.roles import Role
from tests.support.console import SAME_ORIGIN, ConsoleFactory, ConsoleHarness

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def cookie_header(response_headers: list[str]) -> str:
    found = [h for h in response_headers if h.startswith("gateway_console=")]
    assert len(found) == 1, response_headers
    return found[0]


async def test_login_makes_a_session_with_a_strict_httponly_cookie(
    console: ConsoleHarness,
) -> None:
    client = console.anonymous()
    r = await client.post(
        "/console/login",
        data={"token": console.tokens[Role.OPERATOR], "next": "/console/dlq?state=open"},
        headers=SAME_ORIGIN,
    )
    assert r.status_code == 303
    assert r.headers["location"] == "/console/dlq?state=open"
    cookie = cookie_header(r.headers.get_list("set-cookie"))
    parts = {p.strip().split("=")[0].lower() for p in cookie.split(";")}
    assert {"httponly", "path", "samesite"} <= parts
    assert "Path=/console" in cookie and "SameSite=strict" in cookie
    assert "secure" not in parts, "plain http on loopback: no Secure (the browser drops it)"
    # The cookie carries a random id; the table keeps only its SHA-256.
    session_id = cookie.split(";")[0].split("=", 1)[1]
    rows = await console.fetch("SELECT id_sha256, principal, role FROM console_sessions")
    assert [(bytes(r["id_sha256"]), r["principal"], r["role"]) for r in rows] == [
        (sha256(session_id), "operator", "operator")
    ]
    (login,) = await console.audit("login")
    assert (login["actor"], login["via"], login["outcome"]) == ("console:operator", "cookie", "ok")
    r = await client.get("/console/tokens")
    assert r.status_code == 403, "logged in, but an operator is not an admin"


async def test_the_cookie_is_secure_behind_https(console_factory: ConsoleFactory) -> None:
    console = await console_factory(public_origin="https://console.example.com")
    r = await console.anonymous().post(
        "/console/login", data={"token": console.tokens[Role.VIEWER]}, headers=SAME_ORIGIN
    )
    assert r.status_code == 303
    assert "secure" in cookie_header(r.headers.get_list("set-cookie")).lower()


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/metrics"])
async def test_next_is_kept_only_inside_the_console(console: ConsoleHarness, target: str) -> None:
    r = await console.anonymous().post(
        "/console/login",
        data={"token": console.tokens[Role.VIEWER], "next": target},
        headers=SAME_ORIGIN,
    )
    assert r.headers["location"] == "/console/"


async def test_a_page_without_a_session_sends_you_to_log_in_and_back(
    console: ConsoleHarness,
) -> None:
    r = await console.anonymous().get("/console/tokens?x=1")
    assert r.status_code == 303
    assert r.headers["location"] == "/console/login?next=%2Fconsole%2Ftokens%3Fx%3D1"
    page = await console.anonymous().get(r.headers["location"])
    assert page.status_code == 200
    assert 'name="next" value="/console/tokens?x=1"' in page.text
    assert '<label for="token">' in page.text


async def test_a_wrong_token_fails_and_is_audited(console: ConsoleHarness) -> None:
    r = await console.anonymous().post(
        "/console/login", data={"token": "gwc_" + "x" * 43}, headers=SAME_ORIGIN
    )
    assert r.status_code == 401
    assert "not valid" in r.text
    assert "set-cookie" not in r.headers
    (failed,) = await console.audit("login.failed")
    assert (failed["actor"], failed["via"], failed["outcome"]) == (
        "127.0.0.1",
        "anonymous",
        "refused",
    )
    assert await console.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_failures_throttle_the_failing_token_never_a_valid_one(
    console: ConsoleHarness,
) -> None:
    """Five wrong logins in a minute: the same wrong token again is 429, but a valid
    token from the same address (everyone behind one proxy shares it) logs in; the
    failures are audited one row a minute, saying how many were left out."""
    client = console.anonymous()
    for _ in range(5):
        r = await client.post("/console/login", data={"token": "nope"}, headers=SAME_ORIGIN)
        assert r.status_code == 401
    r = await client.post("/console/login", data={"token": "nope"}, headers=SAME_ORIGIN)
    assert r.status_code == 429
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert "Too many failed logins" in r.text
    r = await client.post(
        "/console/login", data={"token": console.tokens[Role.ADMIN]}, headers=SAME_ORIGIN
    )
    assert r.status_code == 303, "a valid token is never locked out by others' failures"
    console.clock.advance(61)
    r = await client.post("/console/login", data={"token": "nope"}, headers=SAME_ORIGIN)
    assert r.status_code == 401, "a minute later the failing token may try again"
    rows = await console.fetch(
        "SELECT detail FROM console_audit WHERE action = 'login.failed' ORDER BY id"
    )
    assert len(rows) == 2  # one a minute, however many failed


async def test_wrong_bearer_tokens_are_audited_and_throttled_per_token(
    console: ConsoleHarness,
) -> None:
    """The API's bearer tokens as the login form's: a wrong one past the limit (20 a
    minute) is 429; a valid one from the same address is answered; audited one row a
    minute."""
    client = console.anonymous()
    wrong = {"Authorization": "Bearer not-a-token"}
    for _ in range(20):
        assert (await client.get("/console/api/v1/events", headers=wrong)).status_code == 401
    refused = await client.get("/console/api/v1/events", headers=wrong)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    good = {"Authorization": f"Bearer {console.tokens[Role.VIEWER]}"}
    assert (await client.get("/console/api/v1/events", headers=good)).status_code == 200
    rows = await console.fetch(
        "SELECT count(*) AS n FROM console_audit WHERE action = 'bearer.refused'"
    )
    assert rows[0]["n"] == 1


async def test_logout_ends_the_session(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    assert (await browser.get("/console/tokens")).status_code == 200
    r = await browser.post("/console/logout")
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
    assert 'gateway_console=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
    assert (
        await console.fetchval("SELECT count(*) FROM console_sessions WHERE ended_at IS NULL") == 0
    )
    (logout,) = await console.audit("logout")
    assert logout["actor"] == "console:admin"


async def test_an_ended_session_cookie_replayed_gets_nothing(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    cookie = browser.cookies["gateway_console"]
    await browser.post("/console/logout")
    thief = console.anonymous(headers=SAME_ORIGIN)
    thief.cookies.set("gateway_console", cookie, domain="127.0.0.1", path="/console")
    r = await thief.get("/console/tokens")
    assert r.status_code == 303 and r.headers["location"].startswith("/console/login")


async def test_a_session_idle_for_30_minutes_ends(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    console.clock.advance(29 * 60)
    assert (await browser.get("/console/tokens")).status_code == 200  # touched
    console.clock.advance(29 * 60)
    assert (await browser.get("/console/tokens")).status_code == 200
    console.clock.advance(30 * 60 + 1)
    r = await browser.get("/console/tokens")
    assert r.status_code == 303 and r.headers["location"].startswith("/console/login")


async def test_a_busy_session_ends_after_8_hours(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    for _ in range(8 * 3 - 1):  # every 20 min, so never idle
        console.clock.advance(20 * 60)
        assert (await browser.get("/console/tokens")).status_code == 200
    console.clock.advance(20 * 60)
    r = await browser.get("/console/tokens")
    assert r.status_code == 303, "8 h after logging in the session is over, however busy"


async def test_bearer_tokens(console: ConsoleHarness) -> None:
    r = await console.client(Role.ADMIN).get("/console/api/v1/tokens")
    assert r.status_code == 200
    r = await console.bearer("gwc_" + "y" * 43).get("/console/api/v1/tokens")
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["status"] == 401
    r = await console.anonymous().get("/console/api/v1/tokens")
    assert r.status_code == 401, "the API answers 401, it does not redirect"


async def test_an_expired_token_is_refused(console: ConsoleHarness) -> None:
    from datetime import timedelta

    token = await console.issue_token("short", Role.ADMIN, expires_in=timedelta(hours=1))
    client = console.bearer(token)
    assert (await client.get("/console/api/v1/tokens")).status_code == 200
    console.clock.advance(3601)
    assert (await client.get("/console/api/v1/tokens")).status_code == 401


async def test_last_use_is_written_at_most_once_a_minute(console: ConsoleHarness) -> None:
    client = console.client(Role.ADMIN)

    async def last_used() -> object:
        return await console.fetchval(
            "SELECT last_used_at FROM console_tokens WHERE name = 'admin'"
        )

    assert await last_used() is None
    await client.get("/console/api/v1/tokens")
    first = await last_used()
    assert first is not None
    console.clock.advance(30)
    await client.get("/console/api/v1/tokens")
    assert await last_used() == first
    console.clock.advance(31)
    await client.get("/console/api/v1/tokens")
    assert await last_used() > first  # type: ignore[operator]


async def create_via_form(client: object, **headers: str) -> int:
    r = await client.post(  # type: ignore[attr-defined]
        "/console/tokens",
        data={"name": "new-one", "role": "viewer", "expires": ""},
        headers=headers,
    )
    return int(r.status_code)


async def live_named(console: ConsoleHarness, name: str) -> int:
    return int(
        await console.fetchval(
            "SELECT count(*) FROM console_tokens WHERE name = $1 AND revoked_at IS NULL", name
        )
    )


async def test_a_cross_site_form_post_is_refused_and_audited(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN, same_origin=False)
    status = await create_via_form(
        browser, **{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
    )
    assert status == 403
    assert await live_named(console, "new-one") == 0, "nothing changed"
    (refused,) = await console.audit("csrf.refused")
    assert (refused["actor"], refused["via"], refused["outcome"]) == (
        "console:admin",
        "cookie",
        "refused",
    )
    assert refused["target"] == "POST /console/tokens"


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"Sec-Fetch-Site": "same-origin"}, True),
        ({"Origin": "http://127.0.0.1:8070"}, True),  # an older browser: Origin decides
        ({"Origin": "http://127.0.0.1:9999"}, False),
        ({"Sec-Fetch-Site": "same-site"}, False),
        ({}, False),  # a cookie and nothing to show where the form came from
    ],
)
async def test_the_cross_site_check_for_cookie_sessions(
    console: ConsoleHarness, headers: dict[str, str], allowed: bool
) -> None:
    browser = await console.session_client(Role.ADMIN, same_origin=False)
    status = await create_via_form(browser, **headers)
    assert (status == 200) is allowed, status
    assert await live_named(console, "new-one") == (1 if allowed else 0)
    assert len(await console.audit("csrf.refused")) == (0 if allowed else 1)


async def test_bearer_requests_are_exempt_from_the_cross_site_check(
    console: ConsoleHarness,
) -> None:
    r = await console.client(Role.ADMIN).post(
        "/console/api/v1/tokens",
        json={"name": "from-api", "role": "viewer"},
        headers={"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
    )
    assert r.status_code == 201
    assert r.json()["token"].startswith("gwc_")
    assert await console.audit("csrf.refused") == []


async def test_a_cross_site_login_is_refused(console: ConsoleHarness) -> None:
    r = await console.anonymous().post(
        "/console/login",
        data={"token": console.tokens[Role.ADMIN]},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert r.status_code == 403
    assert "set-cookie" not in r.headers
    (refused,) = await console.audit("csrf.refused")
    assert refused["via"] == "anonymous"


@pytest.mark.parametrize(
    ("method", "path", "auth"),
    [
        ("GET", "/console/login", None),
        ("GET", "/console/static/console.css", None),
        ("GET", "/console/static/htmx.min.js", None),
        ("GET", "/console/static/missing.js", None),
        ("GET", "/console/tokens", None),  # the redirect to log in
        ("GET", "/console/tokens", Role.VIEWER),  # a 403 page
        ("GET", "/console/tokens", Role.ADMIN),
        ("GET", "/console/api/v1/tokens", None),  # a 401 problem
        ("GET", "/console/api/v1/openapi.json", Role.VIEWER),
        ("GET", "/console/no-such-page", Role.VIEWER),
        ("POST", "/console/logout", None),
    ],
)
async def test_every_answer_carries_the_security_headers(
    console: ConsoleHarness, method: str, path: str, auth: Role | None
) -> None:
    client = console.client(auth) if auth else console.anonymous(headers=SAME_ORIGIN)
    r = await client.request(method, path)
    assert r.headers["content-security-policy"] == CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"


async def test_static_files_are_served_as_their_type(console: ConsoleHarness) -> None:
    r = await console.anonymous().get("/console/static/htmx.min.js")
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert "htmx" in r.text[:200]
    r = await console.anonymous().get("/console/static/console.css")
    assert r.headers["content-type"].startswith("text/css")


async def test_the_token_page_shows_a_new_token_once(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    r = await browser.post(
        "/console/tokens", data={"name": "ci-bot", "role": "operator", "expires": "30d"}
    )
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    token = r.text.split('id="new-token" class="token" type="text" readonly value="')[1][:47]
    assert token.startswith("gwc_")
    row = await console.fetch(
        "SELECT role, created_by, expires_at - created_at AS life, token_sha256 FROM"
        " console_tokens WHERE name = 'ci-bot'"
    )
    assert row[0]["role"] == "operator" and row[0]["created_by"] == "console:admin"
    assert row[0]["life"].days == 30
    assert bytes(row[0]["token_sha256"]) == sha256(token)
    listing = await browser.get("/console/tokens")
    assert "ci-bot" in listing.text and token not in listing.text
    (created,) = await console.audit("token.create")
    assert created["target"] == "token:ci-bot"
    # The new token works, then is revoked from the page, and its session ends.
    bot = await console.session_client(Role.OPERATOR, token=token)
    assert (await bot.get("/console/login")).status_code == 303  # logged in: straight on
    r = await browser.post("/console/tokens/ci-bot/revoke")
    assert r.status_code == 303 and r.headers["location"] == "/console/tokens"
    assert (await console.bearer(token).get("/console/api/v1/openapi.json")).status_code == 401
    page = await bot.get("/console/tokens")
    assert page.status_code == 303 and page.headers["location"].startswith("/console/login")
    (revoked,) = await console.audit("token.revoke")
    assert revoked["actor"] == "console:admin"


async def test_the_token_form_refuses_a_bad_name_or_a_taken_one(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    r = await browser.post("/console/tokens", data={"name": "bad name", "role": "viewer"})
    assert r.status_code == 400 and "a name is 1 to 64" in r.text
    r = await browser.post("/console/tokens", data={"name": "viewer", "role": "viewer"})
    assert r.status_code == 400 and "already called" in r.text
    r = await browser.post(
        "/console/tokens", data={"name": "x", "role": "viewer", "expires": "soon"}
    )
    assert r.status_code == 400 and "lifetime" in r.text
    assert await console.audit("token.create") == []


async def test_the_token_api(console: ConsoleHarness) -> None:
    admin = console.client(Role.ADMIN)
    r = await admin.post("/console/api/v1/tokens", json={"name": "viewer", "role": "viewer"})
    assert r.status_code == 409
    r = await admin.post("/console/api/v1/tokens", json={"name": "n", "role": "root"})
    assert r.status_code == 400
    r = await admin.post(
        "/console/api/v1/tokens", content=b"[", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    r = await admin.post("/console/api/v1/tokens/viewer/revoke")
    assert r.status_code == 200
    assert (
        await console.client(Role.VIEWER).get("/console/api/v1/openapi.json")
    ).status_code == 401
    r = await admin.post("/console/api/v1/tokens/viewer/revoke")
    assert r.status_code == 404
    items = (await admin.get("/console/api/v1/tokens")).json()["items"]
    (viewer,) = [t for t in items if t["name"] == "viewer"]
    assert viewer["revoked_by"] == "console:admin"
    assert "token" not in viewer and "token_sha256" not in viewer


async def test_proxy_headers_are_honoured_only_from_a_trusted_proxy(
    console_factory: ConsoleFactory,
) -> None:
    console = await console_factory(trusted_proxies=["127.0.0.1"])
    sso = {"X-Forwarded-User": "alice@example.com", "X-Forwarded-Role": "admin"}
    r = await console.anonymous(headers=sso).get("/console/api/v1/tokens")
    assert r.status_code == 200
    r = await console.anonymous(headers=sso, transport_client=("10.9.9.9", 1)).get(
        "/console/api/v1/tokens"
    )
    assert r.status_code == 401, "the same headers from anyone else are ignored"
    bad = {"X-Forwarded-User": "alice@example.com", "X-Forwarded-Role": "root"}
    r = await console.anonymous(headers=bad).get("/console/api/v1/tokens")
    assert r.status_code == 401
    r = await console.anonymous(headers={**sso, "Sec-Fetch-Site": "cross-site"}).post(
        "/console/api/v1/tokens", json={"name": "via-sso", "role": "viewer"}
    )
    assert r.status_code == 403, "proxy sign-in rides on the browser: the check applies"
    r = await console.anonymous(headers={**sso, **SAME_ORIGIN}).post(
        "/console/api/v1/tokens", json={"name": "via-sso", "role": "viewer"}
    )
    assert r.status_code == 201
    (created,) = await console.audit("token.create")
    assert (created["actor"], created["via"]) == ("console:alice@example.com", "proxy")


async def test_a_forbidden_request_is_audited(console: ConsoleHarness) -> None:
    r = await console.client(Role.OPERATOR).post(
        "/console/api/v1/tokens", json={"name": "sneaky", "role": "admin"}
    )
    assert r.status_code == 403
    assert "admin" in r.json()["detail"]
    (row,) = await console.audit("forbidden")
    assert (row["actor"], row["role"], row["outcome"], row["target"]) == (
        "console:operator",
        "operator",
        "refused",
        "POST /console/api/v1/tokens",
    )
    assert await live_named(console, "sneaky") == 0


async def test_the_audit_trail_is_insert_only(console: ConsoleHarness) -> None:
    await console.anonymous().post("/console/login", data={"token": "x"}, headers=SAME_ORIGIN)
    async with console.pool.acquire() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="insert-only"):
            await conn.execute("UPDATE console_audit SET actor = 'someone else'")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM console_audit")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("TRUNCATE console_audit")
    assert [r["actor"] for r in await console.audit()] == ["127.0.0.1"]


async def test_the_openapi_document_merges_the_fragments(console: ConsoleHarness) -> None:
    r = await console.client(Role.VIEWER).get("/console/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert "/console/api/v1/tokens" in doc["paths"]
    assert set(doc["paths"]["/console/api/v1/tokens"]) == {"get", "post"}


async def test_a_database_outage_answers_503_with_the_headers() -> None:
    from gateway.adapters.postgres import create_pool
    from gateway.console.app import build_app
    from gateway.console.web import ConsoleDeps
    from tests.support.console import console_settings

    dsn = "postgresql://postgres@127.0.0.1:1/nowhere"
    pool = await create_pool(dsn, connect_timeout_s=1.0)
    try:
        app = build_app(ConsoleDeps(pool=pool, settings=console_settings(dsn)))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8070") as c:
            r = await c.get("/console/api/v1/tokens", headers={"Authorization": "Bearer x"})
            assert r.status_code == 503
            assert r.json()["detail"] == "the database is unavailable"
            assert r.headers["content-security-policy"] == CSP
            r = await c.get("/console/login")
            assert r.status_code == 200, "the login page needs no database"
    finally:
        await pool.close()


async def test_a_form_posted_after_the_session_ended_goes_to_log_in_then_home(
    console: ConsoleHarness,
) -> None:
    browser = await console.session_client(Role.ADMIN)
    console.clock.advance(31 * 60)
    r = await browser.post("/console/tokens", data={"name": "late", "role": "viewer"})
    assert r.status_code == 303
    assert r.headers["location"] == "/console/login?next=%2Fconsole%2F"
    assert await live_named(console, "late") == 0


async def test_anonymous_refusals_cannot_flood_the_audit_trail(console: ConsoleHarness) -> None:
    """200 cross-site logins from one address in a minute, one with a 4 MB `Origin`:
    one row, its values bounded; the next minute's row says how many were left out."""
    anonymous = console.anonymous()
    huge = "https://" + "o" * 4_000_000 + ".example"
    for n in range(200):
        r = await anonymous.post(
            "/console/login", data={"token": "x"},
            headers={"Sec-Fetch-Site": "cross-site", "Origin": huge if n == 0 else "https://e.x"},
        )  # fmt: skip
        assert r.status_code == 403
    (first,) = await console.audit("csrf.refused")
    origin = detail_of(first)["origin"]
    assert origin.endswith(f"... ({len(huge)} chars)") and len(origin) < 250
    console.clock.advance(60)
    await anonymous.post("/console/login", data={"token": "x"},
                         headers={"Sec-Fetch-Site": "cross-site"})  # fmt: skip
    rows = await console.audit("csrf.refused")
    assert len(rows) == 2
    assert [detail_of(r).get("left_out_before") for r in rows] == [None, 199]
    size = await console.fetchval("SELECT max(pg_column_size(detail)) FROM console_audit")
    assert size < 2_000


def detail_of(row: asyncpg.Record) -> dict[str, Any]:
    detail = row["detail"]
    return dict(json.loads(detail) if isinstance(detail, str) else detail)
