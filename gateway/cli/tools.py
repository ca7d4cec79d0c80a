"""Development tools: `sign` (sign a body as a provider would) and `currency-stub`."""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from pathlib import Path

from gateway.cli.common import SubParsers
from gateway.settings import SCHEME_NAMES


def cmd_sign(args: argparse.Namespace) -> int:
    import uuid

    from gateway.adapters.webhook_sender import post_webhook
    from gateway.core.signatures import SchemeParams, get_scheme

    body = sys.stdin.buffer.read() if args.body == "-" else Path(args.body).read_bytes()
    scheme = get_scheme(args.scheme)
    # The core takes its randomness as an argument: a fresh id is made here, at the edge,
    # in the provider's usual shape (unused by schemes that read the id from the body).
    event_id = args.event_id
    if event_id is None:
        event_id = scheme.new_event_id(str(uuid.uuid4()))
    params = SchemeParams(secrets=(args.secret,))
    try:
        headers = scheme.sign(
            params, body, int(time.time()), event_id=event_id, event_type=args.event_type
        )
    except ValueError as exc:  # e.g. github sends the event type in a header: none given
        print(f"gateway sign: error: {exc}", file=sys.stderr)
        return 2
    if not args.send:
        for name, value in headers.items():
            print(f"{name}: {value}")
        return 0
    headers["Content-Type"] = "application/json"
    status, text = post_webhook(args.send, body, headers)
    print(f"{status} {text}")
    return 0 if 200 <= status < 300 else 1


def cmd_currency_stub(args: argparse.Namespace) -> int:
    from gateway.devtools import currency_stub

    rates: dict[str, Decimal] = {} if args.no_default_rates else dict(currency_stub.DEFAULT_RATES)
    rates.update(dict(args.rate))
    currency_stub.serve(rates, args.host, args.port)
    return 0


def _rate_arg(text: str) -> tuple[str, Decimal]:
    from gateway.devtools.currency_stub import parse_pair_rate

    try:
        return parse_pair_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `sign` and `currency-stub`."""
    text = "Sign a body the way a provider would; print or send it."
    sign = sub.add_parser("sign", help=text, description=text, parents=[common])
    sign.add_argument("scheme", choices=SCHEME_NAMES)
    sign.add_argument("--secret", required=True, help="the signing secret")
    sign.add_argument("--body", required=True, help="file with the body, or - for stdin")
    sign.add_argument("--event-id", help="event id header value (github, shopify, standard)")
    sign.add_argument("--event-type", help="event type header value (github, shopify)")
    sign.add_argument("--send", metavar="URL", help="POST the signed body to URL, print the answer")
    sign.set_defaults(func=cmd_sign)

    text = "Run a stand-in currency-service (configurable rates, can fail or stall)."
    stub = sub.add_parser("currency-stub", help=text, description=text, parents=[common])
    stub.add_argument("--host", default="127.0.0.1", help="address to listen on")
    stub.add_argument("--port", type=int, default=8090, help="port to listen on")
    stub.add_argument(
        "--rate",
        type=_rate_arg,
        action="append",
        default=[],
        metavar="BASE/QUOTE=RATE",
        help="a rate to quote, e.g. EUR/USD=1.08 (repeatable; adds to or overrides the defaults)",
    )
    stub.add_argument("--no-default-rates", action="store_true", help="quote only the --rate pairs")
    stub.set_defaults(func=cmd_currency_stub)
