"""The console's access decisions: tokens, session expiry, the login throttle, the
cross-site check, the cookie's Secure flag and where a login may send you next."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.console.access import (
    AuthKind,
    CsrfVerdict,
    LoginThrottle,
    console_origin,
    cookie_secure,
    csrf_verdict,
    is_loopback,
    looks_like_token,
    parse_expires,
    safe_next,
    session_ends_at,
    session_live,
    sha256,
    should_mark_used,
    token_expired,
    token_from_bytes,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_token_is_the_prefix_and_43_url_safe_characters() -> None:
    token = token_from_bytes(bytes(range(32)))
    assert token.startswith("gwc_") and len(token) == 4 + 43
    assert looks_like_token(token)
    assert token_from_bytes(b"\xff" * 32) != token
    assert "=" not in token_from_bytes(b"\xff" * 32)
    with pytest.raises(ValueError):
        token_from_bytes(b"short")


@pytest.mark.parametrize(
    ("text", "shaped"),
    [
        ("gwc_" + "a" * 43, True),
        ("gwc_" + "a" * 42, False),
        ("gwx_" + "a" * 43, False),
        ("gwc_" + "a" * 42 + "/", False),
        ("", False),
    ],
)
def test_token_shape(text: str, shaped: bool) -> None:
    assert looks_like_token(text) is shaped


def test_only_the_sha256_is_kept() -> None:
    assert sha256("gwc_x") == hashlib.sha256(b"gwc_x").digest()
    assert len(sha256("anything")) == 32


@pytest.mark.parametrize(
    ("expires_at", "now", "expired"),
    [(None, at(10**9), False), (at(60), at(59), False), (at(60), at(60), True)],
)
def test_token_expiry(expires_at: datetime | None, now: datetime, expired: bool) -> None:
    assert token_expired(expires_at, now) is expired


@pytest.mark.parametrize(
    ("last_used", "now", "write"),
    [(None, at(0), True), (at(0), at(59), False), (at(0), at(60), True), (at(0), at(3600), True)],
)
def test_last_use_is_written_at_most_once_a_minute(
    last_used: datetime | None, now: datetime, write: bool
) -> None:
    assert should_mark_used(last_used, now) is write


MAX_S, IDLE_S = 8 * 3600, 1800


@pytest.mark.parametrize(
    ("last_seen_s", "now_s", "ended", "live"),
    [
        (0, 1799, False, True),  # within the idle timeout
        (0, 1800, False, False),  # idle for exactly 30 min
        (1000, 2799, False, True),  # touched: the idle clock started again
        (MAX_S - 60, MAX_S - 1, False, True),  # busy, just short of the maximum
        (MAX_S - 60, MAX_S, False, False),  # busy, but 8 h old
        (0, 10, True, False),  # logged out
    ],
)
def test_session_expiry(last_seen_s: int, now_s: int, ended: bool, live: bool) -> None:
    ended_at = at(5) if ended else None
    assert (
        session_live(at(0), at(last_seen_s), ended_at, at(now_s), max_s=MAX_S, idle_s=IDLE_S)
        is live
    )


def test_a_session_ends_at_the_earlier_of_its_limits() -> None:
    assert session_ends_at(at(0), at(0), max_s=MAX_S, idle_s=IDLE_S) == at(IDLE_S)
    assert session_ends_at(at(0), at(MAX_S - 10), max_s=MAX_S, idle_s=IDLE_S) == at(MAX_S)


def test_the_throttle_refuses_the_sixth_attempt_within_a_minute() -> None:
    throttle = LoginThrottle(limit=5)
    for i in range(5):
        assert not throttle.blocked("10.0.0.1", at(i))
        throttle.failed("10.0.0.1", at(i))
    assert throttle.blocked("10.0.0.1", at(5))
    assert throttle.retry_after_s("10.0.0.1", at(5)) == 55
    assert not throttle.blocked("10.0.0.2", at(5)), "another address is counted apart"
    assert throttle.blocked("10.0.0.1", at(59.9))
    assert not throttle.blocked("10.0.0.1", at(60)), "the oldest failure left the window"


def test_a_success_clears_the_count() -> None:
    throttle = LoginThrottle(limit=2)
    throttle.failed("a", at(0))
    throttle.succeeded("a")
    throttle.failed("a", at(1))
    assert not throttle.blocked("a", at(2))


ORIGIN = "http://127.0.0.1:8070"
C, B, P, A = AuthKind.COOKIE, AuthKind.BEARER, AuthKind.PROXY, AuthKind.ANONYMOUS
OK, NO = CsrfVerdict.ALLOW, CsrfVerdict.REFUSE


@pytest.mark.parametrize(
    ("method", "site", "origin", "auth", "verdict"),
    [
        ("GET", "cross-site", "https://evil.example", C, OK),  # safe methods pass
        ("HEAD", None, None, C, OK),
        ("POST", "same-origin", None, C, OK),
        ("POST", "same-origin", "https://evil.example", C, OK),  # the browser's header rules
        ("POST", "cross-site", None, C, NO),
        ("POST", "same-site", ORIGIN, C, NO),  # a sibling subdomain is another origin
        ("POST", "none", None, C, NO),
        ("POST", None, ORIGIN, C, OK),  # no Sec-Fetch-Site: the Origin decides
        ("POST", None, "http://127.0.0.1:8070/", C, OK),
        ("POST", None, "http://127.0.0.1:8071", C, NO),
        ("POST", None, "https://evil.example", C, NO),
        ("POST", None, "null", C, NO),
        ("POST", None, None, C, NO),  # nothing to go by: refused
        ("DELETE", "cross-site", None, P, NO),  # proxy sign-in rides on the browser too
        ("POST", None, None, P, NO),
        ("POST", "cross-site", "https://evil.example", B, OK),  # bearer is exempt
        ("POST", None, None, B, OK),
        ("POST", None, None, A, OK),  # a login from curl
        ("POST", "same-origin", None, A, OK),
        ("POST", "cross-site", None, A, NO),  # a cross-site login form
        ("POST", None, "https://evil.example", A, NO),
    ],
)
def test_csrf_matrix(
    method: str, site: str | None, origin: str | None, auth: AuthKind, verdict: CsrfVerdict
) -> None:
    got = csrf_verdict(
        method=method, sec_fetch_site=site, origin=origin, console_origin=ORIGIN, auth=auth
    )
    assert got is verdict


@pytest.mark.parametrize(
    ("public", "host", "port", "origin"),
    [
        ("", "127.0.0.1", 8070, "http://127.0.0.1:8070"),
        ("", "::1", 8070, "http://[::1]:8070"),
        ("https://Console.Example.com", "0.0.0.0", 8070, "https://console.example.com"),
        ("https://console.example.com:443", "0.0.0.0", 8070, "https://console.example.com"),
        ("http://10.0.0.5:8080", "0.0.0.0", 8070, "http://10.0.0.5:8080"),
    ],
)
def test_console_origin(public: str, host: str, port: int, origin: str) -> None:
    assert console_origin(public, host, port) == origin


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("console.example.com", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("origin", "secure"),
    [
        ("http://127.0.0.1:8070", False),
        ("http://localhost:8070", False),
        ("http://[::1]:8070", False),
        ("https://127.0.0.1:8070", True),
        ("https://console.example.com", True),
        ("http://10.0.0.5:8070", True),  # plain http beyond loopback still gets Secure
    ],
)
def test_cookie_secure(origin: str, secure: bool) -> None:
    assert cookie_secure(origin) is secure


@pytest.mark.parametrize(
    ("target", "kept"),
    [
        ("/console/dlq?state=open", "/console/dlq?state=open"),
        ("/console/", "/console/"),
        (None, "/console/"),
        ("", "/console/"),
        ("https://evil.example/console/", "/console/"),
        ("//evil.example/console/", "/console/"),
        ("/elsewhere", "/console/"),
        ("/console/\\evil", "/console/"),
        ("/console/\r\nSet-Cookie: x", "/console/"),
    ],
)
def test_safe_next(target: str | None, kept: str) -> None:
    assert safe_next(target) == kept


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("2w", 1209600), ("45s", 45)],
)
def test_parse_expires(text: str, seconds: int) -> None:
    assert parse_expires(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "0d", "30", "d", "30y", "-1d", "1.5h"])
def test_parse_expires_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_expires(text)
