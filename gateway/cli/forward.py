"""`gateway forward` and `gateway listen`: deliver accepted events to an HTTP service.

Exit status: 0 stopped by SIGINT or SIGTERM; 3 the target answered 410 and the
destination is paused; 2 the flags or the configuration cannot be used; 1 the database
or NATS cannot be reached. Bad input is one line, never a stack.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar
from urllib.parse import urlsplit

import orjson

from gateway.cli.common import Number, SubParsers, help_texts, load_settings
from gateway.core.forward.filters import ForwardFilter
from gateway.core.forward.request import ResignAs
from gateway.core.forward.retry import parse_schedule
from gateway.errors import ForwardUsageError
from gateway.forward.view import Counts, View, summary_line
from gateway.settings.forward import (
    MAX_IN_FLIGHT,
    ForwardOptions,
    Output,
    Start,
    check_name,
    check_url,
    parse_timeout_s,
    read_secrets,
    read_start,
)
from gateway.settings.secrets import NO_SECRET, secrets_under

#: The exit status of a destination the target paused (410 Gone).
EXIT_PAUSED = 3
IN_FLIGHT = Number(1, MAX_IN_FLIGHT)
FAIL_FIRST = Number(0, 100)
T = TypeVar("T")


def generated_secret() -> str:
    """A fresh Standard Webhooks secret (`whsec_` and 24 random bytes in base64): what
    `gateway listen` signs with when no `--secret-env` names one."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


def shown_url(url: str) -> str:
    """The target without its query or credentials: what the banner may print."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _flag(flag: str, read: Callable[[], T]) -> T:
    try:
        return read()
    except ValueError as exc:
        raise ForwardUsageError(f"{flag}: {exc}") from None


def options_from(args: argparse.Namespace, *, listen: bool) -> tuple[ForwardOptions, str | None]:
    """The destination the flags describe, and the secret to print (listen's own)."""
    url = _flag("--to", lambda: check_url(args.to))
    name = None if args.name is None else _flag("--name", lambda: check_name(args.name))
    try:
        filters = ForwardFilter.parse(tuple(args.provider), tuple(args.type), args.where)
    except ValueError as exc:  # the message names the flag
        raise ForwardUsageError(str(exc)) from None
    schedule = _flag(
        "--retry", lambda: parse_schedule(args.retry or ("dev" if listen else "standard"))
    )
    timeout_s = _flag("--timeout", lambda: parse_timeout_s(args.timeout))
    resign_as = ResignAs(args.resign_as)
    printed = None
    if args.secret_env:
        keys = _flag("--secret-env", lambda: read_secrets(args.secret_env, resign_as, os.environ))
    elif listen:
        printed = generated_secret()
        keys = (printed,)
    else:
        raise ForwardUsageError("--secret-env VAR: name the variable that holds the signing secret")
    start, start_time = _flag("--from", lambda: read_start(args.start))
    options = ForwardOptions(
        url=url,
        name=name,
        filters=filters,
        start=start,
        start_time_iso=start_time,
        ordered=not args.unordered,
        max_in_flight=args.max_in_flight,
        timeout_s=timeout_s,
        schedule=schedule,
        secrets=keys,
        resign_as=resign_as,
        envelope=args.envelope,
        output=Output(args.output),
        verify_tls=not args.insecure,
        park_on_4xx=args.park_on_4xx,
        fail_first=args.fail_first,
        run_id=secrets.token_hex(4),
    )
    return options, printed


def cmd_forward(args: argparse.Namespace, *, listen: bool = False) -> int:
    from gateway.wiring.forward import run_forward
    from gateway.wiring.signals import run_until_signalled

    # Its own destination's secret alone (an ad-hoc one reads --secret-env itself).
    scope = secrets_under(f"forward.{args.name}.") if args.name else NO_SECRET
    settings = load_settings(args, scope)
    declared = settings.forward.get(args.name or "")
    if declared is not None and args.to is None:
        options, printed = replace(declared, output=Output(args.output)), None
    elif declared is not None:
        raise ForwardUsageError(
            f"--name {args.name}: declared in [forward.{args.name}]; run it without --to"
        )
    elif args.to is None:
        raise ForwardUsageError(
            "--to URL is required (or --name NAME of a [forward.NAME] table in the config)"
        )
    else:
        options, printed = options_from(args, listen=listen)
    view = View(options.output, sys.stdout, sys.stderr, terminal=sys.stdout.isatty())

    def ready() -> None:
        if printed is not None:
            view.say(f"Ready! Your webhook signing secret is {printed}")
        view.say(
            f"Forwarding {'every event' if options.filters.is_empty else 'the chosen events'} "
            f"to {shown_url(options.url)} as {options.destination} "
            f"({'ordered per key' if options.ordered else 'unordered'}; Ctrl-C stops)"
        )

    counts = Counts()
    started = time.monotonic()
    run_until_signalled(lambda: run_forward(settings, options, view, counts, ready))
    elapsed_s = time.monotonic() - started
    if options.output is Output.JSON:
        print(orjson.dumps({"summary": counts.as_json()}).decode(), flush=True)
    else:
        print(summary_line(counts, elapsed_s), flush=True)
    if counts.paused:
        print(
            f"gateway: destination {options.destination} paused: the target answered 410 Gone; "
            "run the command again once it takes events",
            file=sys.stderr,
        )
        return EXIT_PAUSED
    return 0


def cmd_listen(args: argparse.Namespace) -> int:
    return cmd_forward(args, listen=True)


def _add_flags(p: argparse.ArgumentParser, *, listen: bool) -> None:
    p.add_argument(
        "--to",
        default=None,
        metavar="URL",
        help="the target: http:// or https:// (not with --name of a [forward.NAME] table)",
    )
    p.add_argument(
        "--name",
        default=None,
        help="a durable destination: consumer forward-NAME resumes where it stopped, and "
        "its dead letters are filed at stage forward:NAME (default: none, from now)",
    )
    p.add_argument(
        "--provider", action="append", default=[], metavar="P", help="only this provider's"
    )
    p.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="GLOB",
        help="only these types, as in 'gateway events list --type' (exact, or a prefix*)",
    )
    p.add_argument(
        "--where", default=None, metavar="JSON", help="only bodies that contain this JSON object"
    )
    p.add_argument(
        "--from",
        dest="start",
        default=Start.NOW.value,
        metavar="now|start|TIME",
        help="where a new destination starts in the stream (default: now)",
    )
    order = p.add_mutually_exclusive_group()
    order.add_argument(
        "--ordered",
        action="store_false",
        dest="unordered",
        help="one event per key in flight, in key_seq order (the default)",
    )
    order.add_argument("--unordered", action="store_true", help="no order: N events in flight")
    # Both flags write `unordered`; argparse takes the first one's default (store_false:
    # True), so the documented default is set here, once.
    p.set_defaults(unordered=False)
    p.add_argument(
        "--max-in-flight",
        type=IN_FLIGHT,
        default=16,
        metavar="N",
        help=f"attempts at once (default 16, at most {MAX_IN_FLIGHT})",
    )
    p.add_argument("--timeout", default="15s", help="per attempt (default 15s)")
    p.add_argument(
        "--retry",
        default=None,
        metavar="dev|standard|LIST",
        help="delays before each retry, such as 1s,10s,1m "
        f"(default: {'dev' if listen else 'standard'})",
    )
    p.add_argument(
        "--secret-env",
        default=None,
        metavar="VAR",
        help="the variable holding the signing secret(s), space-separated during a rotation"
        + (" (default: a new secret, printed at start)" if listen else ""),
    )
    p.add_argument(
        "--resign-as",
        choices=[r.value for r in ResignAs],
        default=ResignAs.STANDARD.value,
        help="sign as Standard Webhooks (default) or as that provider would",
    )
    p.add_argument(
        "--envelope",
        action="store_true",
        help="wrap the body with provider, event id, type and received-at",
    )
    p.add_argument(
        "--output",
        choices=[o.value for o in Output],
        default=Output.LINES.value,
        help="a line per attempt (default), NDJSON, or only the summary",
    )
    p.add_argument("--insecure", action="store_true", help="do not verify the target's TLS")
    p.add_argument(
        "--park-on-4xx",
        action="store_true",
        help="park an event at once when the target answers 4xx (other than 408/425/429)",
    )
    p.add_argument(
        "--fail-first",
        type=FAIL_FIRST,
        default=0,
        metavar="N",
        help="answer as a 503 for each event's first N attempts, sending nothing: "
        "see retries and de-duplication without a proxy",
    )


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `forward` and `listen`."""
    forward = sub.add_parser(
        "forward",
        help="Deliver accepted events to an HTTP service, re-signed, durable by name.",
        parents=[common],
        **help_texts(
            """Send each event the gateway accepted to an HTTP target, byte for byte,
            signed per Standard Webhooks (or as --resign-as says) with a webhook-id that
            stays the same across retries, replays and restarts. Only a 2xx within the
            timeout counts; redirects are not followed; 429 and 503 are retried after
            their Retry-After (at most 1 h); a 410 pauses the destination (exit 3).
            Exhausted retries are parked at stage forward:NAME for 'gateway dlq replay'.""",
            (
                "gateway forward --config gateway.toml --to https://billing.internal/webhooks "
                "--name billing --secret-env BILLING_WEBHOOK_SECRET",
                "gateway forward --to http://localhost:3000/hooks --secret-env SECRET "
                "--provider stripe --type 'payment_intent.*' --unordered --output json",
            ),
        ),
    )
    _add_flags(forward, listen=False)
    forward.set_defaults(func=cmd_forward)
    listen = sub.add_parser(
        "listen",
        help="Forward to a local service while developing (retry dev, a new secret).",
        parents=[common],
        **help_texts(
            """'gateway forward' with development defaults: retries after 1 s, 5 s and
            30 s, and a signing secret made at start and printed, for the handler under
            development to verify with. Without --name it sees events from now on; with
            one it also gets what arrived while it was stopped.""",
            (
                "gateway listen --config gateway.toml --to http://localhost:3000/webhooks",
                "gateway listen --to http://localhost:3000/webhooks --fail-first 2",
            ),
        ),
    )
    _add_flags(listen, listen=True)
    # Its screen is the attempt lines: the JSON logs stay off it unless --log-level (or
    # GATEWAY_LOG_LEVEL) asks for them.
    listen.set_defaults(func=cmd_listen, default_log_level="CRITICAL")
