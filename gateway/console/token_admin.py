"""Issuing and revoking console tokens, for the tokens page, the API and the CLI alike:
the token is made here, shown once, and only its SHA-256 is stored."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta

from gateway.adapters.postgres import Conn
from gateway.adapters.postgres.console import access as store
from gateway.core.console.access import TOKEN_BYTES, sha256, token_from_bytes
from gateway.core.console.roles import Role

#: The names `console_tokens.name` accepts (the table checks it too), matched whole: a
#: `$` alone would let a trailing newline through, which the table refuses.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class BadTokenRequest(ValueError):
    """A name or role the console does not accept; the message says which."""


class NameTaken(Exception):
    """A live token already has this name."""


def check_request(name: str, role: str) -> Role:
    if not NAME_RE.fullmatch(name):
        raise BadTokenRequest(
            "a name is 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a "
            f"letter or digit; got {name!r}"
        )
    try:
        return Role(role)
    except ValueError:
        raise BadTokenRequest(
            f"role must be one of {', '.join(str(r) for r in Role)}; got {role!r}"
        ) from None


async def issue(
    conn: Conn,
    *,
    name: str,
    role: str,
    created_by: str,
    now: datetime,
    expires_in: timedelta | None,
) -> str:
    """Create a token and return it (the only time it is ever seen). Raises
    `BadTokenRequest`, or `NameTaken` when a live token has the name."""
    checked = check_request(name, role)
    token = token_from_bytes(secrets.token_bytes(TOKEN_BYTES))
    try:
        await store.create_token(
            conn,
            name=name,
            role=str(checked),
            token_sha256=sha256(token),
            created_by=created_by,
            now=now,
            expires_at=now + expires_in if expires_in is not None else None,
        )
    except store.NameTaken:
        raise NameTaken(name) from None
    return token


async def revoke(conn: Conn, *, name: str, revoked_by: str, now: datetime) -> bool:
    """Revoke the live token `name` and end its sessions; False if none is live."""
    return await store.revoke_token(conn, name=name, revoked_by=revoked_by, now=now)
