"""`gateway ordering`: see each key's place in its order, and release a held key.

Exit status: 0 done; 1 the key has no ordering state; 2 the flags or the configuration
cannot be used, or the key is not held. Bad input is one line, never a stack.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from gateway import settings as settings_mod
from gateway.cli.common import (
    ROWS_SHOWN,
    SubParsers,
    help_texts,
    load_settings,
    login_name,
    operator_command,
    operator_family,
)
from gateway.cli.format import dumps, format_age, short, table, when
from gateway.core.ordering.admin import KeyListing, check_note, release_line
from gateway.core.ordering.public import key_doc, release_doc
from gateway.wiring import ordering as wiring

Settings = settings_mod.Settings
Body = Callable[[Settings, argparse.Namespace], Coroutine[Any, Any, int]]

#: Keys are at most 200 bytes; a table shows the first 64 (a hashed key whole).
_KEY_CHARS = 64


def operator_name() -> str:
    """Who releases: the login name, as `gateway dlq resolve` records it. The skip's log
    row needs an actor to be explained, so an unnamed operator is still one."""
    return login_name() or "operator"


def key_table(keys: list[KeyListing], now: datetime) -> str:
    headings = ("provider", "key", "applied", "last", "hold", "held since", "dlq id")
    rows = [
        (
            k.provider,
            short(k.order_key, _KEY_CHARS),
            k.applied_seq,
            "-" if k.last_seq is None else k.last_seq,
            k.hold_reason or "-",
            "-" if k.held_at is None else f"{when(k.held_at)} ({_age(k.held_at, now)})",
            k.held_dlq_id or "-",
        )
        for k in keys
    ]
    return table(headings, rows)


def _age(then: datetime, now: datetime) -> str:
    return format_age((now - then).total_seconds())


def _out(text: str) -> None:
    print(text, flush=True)


async def keys_body(settings: Settings, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    keys, more = await wiring.key_states(
        settings, held=args.held, provider=args.provider, limit=args.limit
    )
    if args.json:
        _out(dumps([key_doc(k, now) for k in keys]))
        return 0
    if not keys:
        _out("no held keys" if args.held else "no ordered keys")
        return 0
    _out(key_table(keys, now))
    if more:
        which = "oldest holds" if args.held else "most recently numbered keys"
        _out(f"showing the {len(keys)} {which} (raise --limit to see more)")
    return 0


async def release_body(settings: Settings, args: argparse.Namespace) -> int:
    release = await wiring.release_key(
        settings, args.provider_name, args.key, args.note, operator_name()
    )
    _out(dumps(release_doc(release)) if args.json else release_line(release))
    return 0


def _command(body: Body) -> Callable[[argparse.Namespace], int]:
    def start(args: argparse.Namespace) -> Coroutine[Any, Any, int]:
        # Flags are checked before the configuration is read or anything connects.
        if hasattr(args, "note"):
            args.note = check_note(args.note)
        return body(load_settings(args), args)

    return operator_command("ordering", "ordering_command", start)


ABOUT = """Settlement applies each key's events (a payment, a transaction, an order) in the
order the gateway received them. An event parked for good holds its key: the key's later
events are parked behind it until it settles or an operator releases the key. List the
keys and their holds, and release one. Exit status: 0 done; 1 the key has no ordering
state; 2 the flags or the configuration cannot be used, or the key is not held."""
CFG = "--config gateway.toml"


def add_commands(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `gateway ordering ...`."""
    ordering = subparsers.add_parser(
        "ordering",
        help="List ordered keys and their holds; release a held key.",
        parents=[common],
        **help_texts(
            ABOUT,
            (
                f"gateway ordering keys --held {CFG}",
                f'gateway ordering release stripe pi_3Mtw --note "refunded by support" {CFG}',
            ),
        ),
    )
    family = operator_family(ordering, "ordering_command")
    p = family.add(
        "keys",
        _command(keys_body),
        "List keys: applied and last sequence, hold.",
        """List ordered keys, most recently numbered first (with --held, held keys only,
        oldest hold first): provider, key, the sequence settlement applied up to and the
        last one ingest gave, and for a held key why, since when, and the dead letter
        that holds it.""",
        (
            f"gateway ordering keys --held {CFG}",
            f"gateway ordering keys --provider stripe --limit 20 --json {CFG}",
        ),
    )
    p.add_argument("--held", action="store_true", help="held keys only, oldest hold first")
    p.add_argument("--provider", help="one provider's keys (e.g. stripe, service:billing)")
    p.add_argument("--limit", type=ROWS_SHOWN, default=50, help="most keys shown (default 50)")
    p = family.add(
        "release",
        _command(release_body),
        "Release a held key: skip its blocking event.",
        """Release a held key: its blocking dead letter is resolved by hand with --note
        and the operator's login name, the key moves past it (logged as skipped), and
        the hold is cleared, in one transaction. The events parked behind it stay
        parked: replay them with gateway dlq replay.""",
        (f'gateway ordering release stripe pi_3Mtw --note "refunded by support" {CFG}',),
    )
    p.add_argument("provider_name", metavar="PROVIDER", help="the key's provider")
    p.add_argument("key", metavar="KEY", help="the key, as gateway ordering keys shows it")
    p.add_argument("--note", required=True, help="why the key is released, kept as the cause")
