"""`gateway console`: serve the operator console; `gateway console token create|revoke`:
the tokens that let operators in."""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.cli.common import (
    LISTEN_PORT,
    SubParsers,
    help_texts,
    load_settings,
    login_name,
    operator_family,
)
from gateway.cli.format import print_json

#: uvicorn's exit status when the application's start-up failed (as `gateway serve`).
STARTUP_FAILURE = 3

ABOUT = """Serve the operator console (HTML pages and the JSON admin API under
/console/api/v1) on [console] host and port, until SIGINT or SIGTERM. It reads and
writes PostgreSQL, asks NATS for the settlement consumer's backlog and the [ledger]
for merchants' balances and operators' adjustments; replays it plans are run by
'gateway dlq run-jobs'. Beyond a loopback address it refuses to
start (exit 2) until a token exists or [console] trusted_proxies is set."""

TOKEN_ABOUT = """Issue or revoke console tokens. A token is printed once, alone on
stdout; only its SHA-256 is stored, with its name, role, creator (your login name) and
expiry. Revoking a token ends every session made with it."""  # noqa: S105

CFG = "--config gateway.toml"


def _actor() -> str:
    return login_name() or "operator"


def cmd_console(args: argparse.Namespace) -> int:
    from gateway.wiring.console import serve_console

    settings = load_settings(args)
    host = args.host or settings.console.host
    port = args.port or settings.console.port
    started = asyncio.run(serve_console(settings, host, port))
    return 0 if started else STARTUP_FAILURE


def cmd_token_create(args: argparse.Namespace) -> int:
    from gateway.console.token_admin import BadTokenRequest, NameTaken, check_request
    from gateway.core.console.access import parse_expires
    from gateway.wiring.console import create_token

    name = "gateway console token create"
    try:
        check_request(args.name, args.role)
        lifetime = parse_expires(args.expires) if args.expires else None
    except ValueError as exc:  # BadTokenRequest too
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    settings = load_settings(args)
    try:
        token = asyncio.run(create_token(settings, args.name, args.role, _actor(), lifetime))
    except NameTaken:
        print(
            f"{name}: a live token is already called {args.name!r}; revoke it first",
            file=sys.stderr,
        )
        return 1
    except BadTokenRequest as exc:  # pragma: no cover - checked above
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json({"name": args.name, "role": args.role, "token": token})
    else:
        print(token)  # alone: `TOKEN=$(gateway console token create ...)` works
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from gateway.wiring.console import revoke_token

    settings = load_settings(args)
    revoked = asyncio.run(revoke_token(settings, args.name, _actor()))
    if args.json:
        print_json({"name": args.name, "revoked": revoked})
    elif revoked:
        print(f"revoked {args.name}; its sessions are ended")
    if not revoked:
        if not args.json:
            print(
                f"gateway console token revoke: no live token is called {args.name!r}",
                file=sys.stderr,
            )
        return 1
    return 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway console` and `gateway console token create|revoke`."""
    console = sub.add_parser(
        "console",
        help="Serve the operator console; issue and revoke its tokens.",
        parents=[common],
        **help_texts(
            ABOUT,
            (
                f"gateway console {CFG}",
                f"gateway console token create --name alice --role operator --expires 30d {CFG}",
                f"gateway console token revoke alice {CFG}",
            ),
        ),
    )
    console.add_argument("--host", default=None, help="listen address (default: console.host)")
    console.add_argument(
        "--port", type=LISTEN_PORT, default=None, help="listen port (default: console.port)"
    )
    console.set_defaults(func=cmd_console)
    # Optional: without a sub-command, `gateway console` runs `cmd_console` itself.
    token = operator_family(console, "console_command", required=False).add(
        "token",
        None,  # a family only: `gateway console token` alone asks for its ACTION
        "Issue or revoke a console token.",
        TOKEN_ABOUT,
        (
            f"gateway console token create --name alice --role operator --expires 30d {CFG}",
            f"gateway console token revoke alice {CFG}",
        ),
    )
    actions = operator_family(token, "token_command", metavar="ACTION")
    create = actions.add(
        "create",
        cmd_token_create,
        "Issue a token and print it (once).",
        """Issue a token for NAME with ROLE (viewer: metadata and counts; investigator:
        also payloads; operator: also replay, resolve and release keys; admin: also
        tokens and the audit export) and print it, alone, on stdout. It cannot be
        shown again. --expires: a lifetime like 30d, 12h or 90m (default: never).""",
        (f"gateway console token create --name alice --role operator --expires 30d {CFG}",),
    )
    create.add_argument("--name", required=True, help="who or what holds it (unique while live)")
    create.add_argument(
        "--role",
        required=True,
        choices=("viewer", "investigator", "operator", "admin"),
        help="what it may do",
    )
    create.add_argument("--expires", default=None, metavar="LIFETIME", help="e.g. 30d, 12h, 90m")
    revoke = actions.add(
        "revoke",
        cmd_token_revoke,
        "Revoke a token and end its sessions.",
        "Revoke the live token NAME; every session made with it ends at once.",
        (f"gateway console token revoke alice {CFG}",),
    )
    revoke.add_argument("name", metavar="NAME", help="the token's name")
