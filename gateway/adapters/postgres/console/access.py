"""The console's tokens and sessions in PostgreSQL. Only SHA-256 digests of tokens and
session ids are stored; the decisions (expiry, when to mark a token used) are in
`gateway.core.console.access`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.console.access import session_live, should_mark_used, token_expired
from gateway.errors import DatabaseError

_UNIQUE_VIOLATION = "23505"


@dataclass(frozen=True)
class TokenRow:
    id: int
    name: str
    role: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "role": self.role,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "revoked_by": self.revoked_by,
        }


@dataclass(frozen=True)
class SessionRow:
    token_id: int | None
    principal: str
    role: str


_SELECT_TOKENS = (
    "SELECT id, name, role, created_by, created_at, expires_at, last_used_at, revoked_at,"
    " revoked_by FROM console_tokens"
)


class NameTaken(Exception):
    """A live token already has this name."""


async def create_token(
    conn: Conn,
    *,
    name: str,
    role: str,
    token_sha256: bytes,
    created_by: str,
    now: datetime,
    expires_at: datetime | None,
) -> int:
    """Store a new token's digest; raise `NameTaken` if a live token has the name."""
    try:
        with translate_errors():
            return int(
                await conn.fetchval(
                    "INSERT INTO console_tokens"
                    " (name, role, token_sha256, created_by, created_at, expires_at)"
                    " VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    name,
                    role,
                    token_sha256,
                    created_by,
                    now,
                    expires_at,
                )
            )
    except DatabaseError as exc:
        if exc.sqlstate == _UNIQUE_VIOLATION:
            raise NameTaken(name) from exc
        raise


async def revoke_token(conn: Conn, *, name: str, revoked_by: str, now: datetime) -> bool:
    """Revoke the live token called `name` and end its sessions; False if there is none."""
    with translate_errors():
        token_id = await conn.fetchval(
            "UPDATE console_tokens SET revoked_at = $2, revoked_by = $3"
            " WHERE name = $1 AND revoked_at IS NULL RETURNING id",
            name,
            now,
            revoked_by,
        )
        if token_id is None:
            return False
        await conn.execute(
            "UPDATE console_sessions SET ended_at = $2 WHERE token_id = $1 AND ended_at IS NULL",
            token_id,
            now,
        )
    return True


async def list_tokens(conn: Conn) -> list[TokenRow]:
    """Every token, live ones first, newest first."""
    with translate_errors():
        rows = await conn.fetch(
            _SELECT_TOKENS + " ORDER BY revoked_at IS NOT NULL, created_at DESC, id DESC"
        )
    return [TokenRow(**dict(row)) for row in rows]


async def find_token(conn: Conn, token_sha256: bytes, now: datetime) -> TokenRow | None:
    """The live (unrevoked, unexpired) token with this digest, marking it used (at most
    once a minute); None if there is none."""
    with translate_errors():
        row = await conn.fetchrow(
            _SELECT_TOKENS + " WHERE token_sha256 = $1 AND revoked_at IS NULL",
            token_sha256,
        )
        if row is None:
            return None
        token = TokenRow(**dict(row))
        if token_expired(token.expires_at, now):
            return None
        if should_mark_used(token.last_used_at, now):
            await conn.execute(
                "UPDATE console_tokens SET last_used_at = $2 WHERE id = $1", token.id, now
            )
    return token


async def live_token_exists(conn: Conn, now: datetime) -> bool:
    """Whether any token could log in now (the console's start-up check)."""
    with translate_errors():
        return bool(
            await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM console_tokens WHERE revoked_at IS NULL"
                " AND (expires_at IS NULL OR expires_at > $1))",
                now,
            )
        )


async def create_session(
    conn: Conn,
    *,
    id_sha256: bytes,
    token_id: int | None,
    principal: str,
    role: str,
    address: str | None,
    now: datetime,
    max_s: int,
) -> None:
    with translate_errors():
        await conn.execute(
            "INSERT INTO console_sessions"
            " (id_sha256, token_id, principal, role, address, created_at, last_seen_at,"
            "  expires_at) VALUES ($1, $2, $3, $4, $5, $6, $6, $7)",
            id_sha256,
            token_id,
            principal,
            role,
            address,
            now,
            now + timedelta(seconds=max_s),
        )


async def find_session(
    conn: Conn, id_sha256: bytes, now: datetime, *, max_s: int, idle_s: int
) -> SessionRow | None:
    """The live session with this digest, touched (its idle clock starts again); None
    if it ended, expired, or its token was revoked or expired."""
    with translate_errors():
        row = await conn.fetchrow(
            "SELECT s.token_id, s.principal, s.role, s.created_at, s.last_seen_at, s.ended_at,"
            "       s.expires_at, t.revoked_at, t.expires_at AS token_expires_at"
            " FROM console_sessions s LEFT JOIN console_tokens t ON t.id = s.token_id"
            " WHERE s.id_sha256 = $1",
            id_sha256,
        )
        if row is None:
            return None
        if not session_live(
            row["created_at"], row["last_seen_at"], row["ended_at"], now, max_s=max_s, idle_s=idle_s
        ):
            return None
        if now >= row["expires_at"]:
            return None
        if row["token_id"] is not None and (
            row["revoked_at"] is not None or token_expired(row["token_expires_at"], now)
        ):
            return None
        await conn.execute(
            "UPDATE console_sessions SET last_seen_at = GREATEST(last_seen_at, $2)"
            " WHERE id_sha256 = $1",
            id_sha256,
            now,
        )
    return SessionRow(token_id=row["token_id"], principal=row["principal"], role=row["role"])


async def end_session(conn: Conn, id_sha256: bytes, now: datetime) -> bool:
    """Log out: the session ends now. False if it had already ended (or never was)."""
    with translate_errors():
        ended = await conn.fetchval(
            "UPDATE console_sessions SET ended_at = $2"
            " WHERE id_sha256 = $1 AND ended_at IS NULL RETURNING 1",
            id_sha256,
            now,
        )
    return ended is not None
