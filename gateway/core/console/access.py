"""The console's access decisions: token format and hashing, when a session ends, the
login throttle, and whether an unsafe request may pass the cross-site check.

Pure: time is passed in, nothing is read or written here.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import ipaddress
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit

#: Every console token starts with this, so a leaked one is recognisable in a log or a
#: secret scanner's rule.
TOKEN_PREFIX = "gwc_"  # noqa: S105 (a prefix, not a secret)
#: Random bytes in a token (and in a session id): 256 bits.
TOKEN_BYTES = 32
_TOKEN_RE = re.compile(r"^gwc_[A-Za-z0-9_-]{43}$")
#: A token's `last_used_at` is written at most this often: a busy API client would
#: otherwise turn every read into a write.
LAST_USED_EVERY_S = 60
#: The window the login throttle counts failures in.
THROTTLE_WINDOW_S = 60
#: Methods that change nothing, exempt from the cross-site check.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class AuthKind(enum.StrEnum):
    """How a request proved who sent it."""

    COOKIE = "cookie"
    BEARER = "bearer"
    PROXY = "proxy"
    ANONYMOUS = "anonymous"


class CsrfVerdict(enum.StrEnum):
    ALLOW = "allow"
    REFUSE = "refuse"


def token_from_bytes(random: bytes) -> str:
    """A token from `TOKEN_BYTES` random bytes: `gwc_` and 43 url-safe characters."""
    if len(random) != TOKEN_BYTES:
        raise ValueError(f"a token needs {TOKEN_BYTES} random bytes, got {len(random)}")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(random).rstrip(b"=").decode("ascii")


def looks_like_token(text: str) -> bool:
    """Whether `text` has a token's shape (not whether it is a live token)."""
    return bool(_TOKEN_RE.match(text))


def session_id_from_bytes(random: bytes) -> str:
    """A session id for the cookie: 32 random bytes, url-safe, no padding."""
    return base64.urlsafe_b64encode(random).rstrip(b"=").decode("ascii")


def sha256(secret: str) -> bytes:
    """What the tables keep of a token or a session id: its SHA-256, never the secret."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def token_expired(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and now >= expires_at


def should_mark_used(last_used_at: datetime | None, now: datetime) -> bool:
    """Whether a token's look-up writes `last_used_at` (at most once a minute)."""
    return last_used_at is None or now - last_used_at >= timedelta(seconds=LAST_USED_EVERY_S)


def session_ends_at(
    created_at: datetime, last_seen_at: datetime, *, max_s: int, idle_s: int
) -> datetime:
    """A session ends at its maximum age or after `idle_s` without a request, whichever
    comes first."""
    return min(created_at + timedelta(seconds=max_s), last_seen_at + timedelta(seconds=idle_s))


def session_live(
    created_at: datetime,
    last_seen_at: datetime,
    ended_at: datetime | None,
    now: datetime,
    *,
    max_s: int,
    idle_s: int,
) -> bool:
    if ended_at is not None:
        return False
    return now < session_ends_at(created_at, last_seen_at, max_s=max_s, idle_s=idle_s)


def throttle_key(address: str, token: str) -> str:
    """What failed logins and bearer tokens are counted under: the address and the
    offered token's digest prefix. Several people behind one proxy share an address; a
    run of wrong tokens from it must not lock out the valid token of someone else there,
    and a token's text is never kept, only 8 hex digits of its SHA-256."""
    return f"{address} {sha256(token).hex()[:8] if token else '-'}"


@dataclass
class LoginThrottle:
    """Failed logins per address in a sliding minute. After `limit` failures, further
    attempts from that address are refused (429) until the oldest failure is a minute
    old. Kept in the process's memory: a restart forgets it, and each console process
    counts on its own, which is enough to make guessing a 256-bit token hopeless anyway;
    the throttle keeps the audit trail and the log from being flooded."""

    limit: int
    window_s: int = THROTTLE_WINDOW_S
    _failures: dict[str, deque[datetime]] = field(default_factory=dict)

    def _recent(self, address: str, now: datetime) -> deque[datetime]:
        seen = self._failures.get(address)
        if seen is None:
            return deque()
        cutoff = now - timedelta(seconds=self.window_s)
        while seen and seen[0] <= cutoff:
            seen.popleft()
        if not seen:
            del self._failures[address]
        return seen

    def blocked(self, address: str, now: datetime) -> bool:
        """Whether an attempt from `address` at `now` is refused without looking."""
        return len(self._recent(address, now)) >= self.limit

    def retry_after_s(self, address: str, now: datetime) -> int:
        seen = self._recent(address, now)
        if len(seen) < self.limit:
            return 0
        wait = seen[0] + timedelta(seconds=self.window_s) - now
        return max(1, int(wait.total_seconds() + 0.999))

    def failed(self, address: str, now: datetime) -> None:
        self._recent(address, now)
        self._failures.setdefault(address, deque()).append(now)
        # Bounded memory: never more entries per address than the limit needs.
        seen = self._failures[address]
        while len(seen) > self.limit:
            seen.popleft()

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)


def csrf_verdict(
    *,
    method: str,
    sec_fetch_site: str | None,
    origin: str | None,
    console_origin: str,
    auth: AuthKind,
) -> CsrfVerdict:
    """Whether an unsafe request may go on.

    A browser attaches the session cookie to a cross-site form post too (SameSite=Strict
    guards modern browsers; this check guards the rest and same-site siblings): a
    cookie- or proxy-authenticated unsafe request passes only with `Sec-Fetch-Site:
    same-origin` or, where a browser sends no such header, an `Origin` equal to the
    console's. A bearer token is never sent by a browser on its own, so it is exempt. An
    anonymous request (the login form) is refused only on evidence of another site.
    """
    if method.upper() in SAFE_METHODS or auth is AuthKind.BEARER:
        return CsrfVerdict.ALLOW
    site = (sec_fetch_site or "").strip().lower()
    same_origin = normalise_origin(origin) == normalise_origin(console_origin) if origin else False
    if auth is AuthKind.ANONYMOUS:
        if site and site not in ("same-origin", "none"):
            return CsrfVerdict.REFUSE
        if origin and origin != "null" and not same_origin and not site:
            return CsrfVerdict.REFUSE
        return CsrfVerdict.ALLOW
    if site:
        return CsrfVerdict.ALLOW if site == "same-origin" else CsrfVerdict.REFUSE
    return CsrfVerdict.ALLOW if same_origin else CsrfVerdict.REFUSE


def normalise_origin(origin: str | None) -> str:
    """`scheme://host[:port]`, lower-cased, default ports dropped."""
    if not origin:
        return ""
    parts = urlsplit(origin.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def console_origin(public_origin: str, host: str, port: int) -> str:
    """The console's origin as browsers see it: the configured one, else `http://host:port`."""
    if public_origin:
        return normalise_origin(public_origin)
    shown = f"[{host}]" if ":" in host else host
    return normalise_origin(f"http://{shown}:{port}")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) only listens on this machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def cookie_secure(origin: str) -> bool:
    """The session cookie is `Secure` except where the console is plain http on a
    loopback host (a browser would never send a Secure cookie there)."""
    parts = urlsplit(origin)
    return not (parts.scheme == "http" and is_loopback(parts.hostname or ""))


def safe_next(target: str | None) -> str:
    """Where to go after logging in: `target` only if it is a path inside the console
    (never another site, nor `//host`), else the overview."""
    if not target or not target.startswith("/console/") or target.startswith("//"):
        return "/console/"
    if "\\" in target or any(ord(ch) < 0x20 for ch in target):
        return "/console/"
    return target


_EXPIRES_RE = re.compile(r"^(\d{1,5})([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_expires(text: str) -> timedelta:
    """`30d`, `12h`, `90m`, `2w`: a token's lifetime. Raises ValueError otherwise."""
    match = _EXPIRES_RE.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"expected a lifetime like 30d, 12h or 90m, got {text!r}")
    return timedelta(seconds=int(match.group(1)) * _UNIT_S[match.group(2)])
