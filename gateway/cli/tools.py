"""Development tools: `sign` (sign a body as a provider would) and `currency-stub`."""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.common import LISTEN_PORT, SubParsers, help_texts
from gateway.cli.format import print_json
from gateway.settings import SCHEME_NAMES

if TYPE_CHECKING:
    from gateway.core.signatures import SchemeParams


def _signing(args: argparse.Namespace) -> tuple[str, SchemeParams] | str:
    """The scheme and its parameters: a configured provider's (`--provider`, its
    secrets and settings exactly as the gateway verifies with), else the named
    scheme's with `--secret` (and `--url`). A problem comes back as its message."""
    from gateway.cli.common import load_settings
    from gateway.core.signatures import SchemeParams

    if args.provider is not None:
        from gateway.settings.secrets import secrets_under

        # That provider's signing secrets alone: the ones it signs with.
        scope = secrets_under(f"providers.{args.provider}.secret_env")
        provider = load_settings(args, scope).providers.get(args.provider)
        if provider is None:
            return f"no provider named {args.provider!r} is configured"
        return provider.scheme, provider.params
    if args.scheme is None or args.secret is None:
        return "name a scheme and give --secret, or name a configured --provider"
    return args.scheme, SchemeParams(secrets=(args.secret,), url=args.url or "")


def cmd_sign(args: argparse.Namespace) -> int:
    import uuid

    from gateway.core.providers import get_provider
    from gateway.wiring.ops import post_signed

    body = sys.stdin.buffer.read() if args.body == "-" else Path(args.body).read_bytes()
    found = _signing(args)
    if isinstance(found, str):
        print(f"gateway sign: error: {found}", file=sys.stderr)
        return 2
    scheme_name, params = found
    provider = get_provider(scheme_name)
    scheme = provider.scheme
    # The core takes its randomness as an argument: a fresh id is made here, at the edge,
    # in the provider's usual shape (unused by schemes that read the id from the body).
    event_id = args.event_id
    if event_id is None:
        event_id = scheme.new_event_id(str(uuid.uuid4()))
    signed_body = body
    try:
        if provider.sign_body is not None:  # the signature lives in the body (Adyen)
            signed_body = provider.sign_body(params, body)
        headers = scheme.sign(
            params, signed_body, int(time.time()), event_id=event_id, event_type=args.event_type
        )
    except ValueError as exc:  # e.g. github sends the event type in a header: none given
        print(f"gateway sign: error: {exc}", file=sys.stderr)
        return 2
    body_out = {} if signed_body is body else {"body": signed_body.decode("utf-8", "replace")}
    if not args.send:
        if args.json:
            print_json({"headers": headers, **body_out})
        else:
            for name, value in headers.items():
                print(f"{name}: {value}")
            if body_out:  # what to send, signed: after a blank line, as in HTTP
                print()
                print(body_out["body"])
        return 0
    body = signed_body
    headers.setdefault("Content-Type", "application/json")  # a form scheme names its own
    status, text = post_signed(args.send, body, headers)
    if args.json:
        print_json({"headers": headers, "status": status, "response": text})
    else:
        print(f"{status} {text}")
    return 0 if 200 <= status < 300 else 1


def cmd_currency_stub(args: argparse.Namespace) -> int:
    from gateway import currency_stub

    rates: dict[str, Decimal] = {} if args.no_default_rates else dict(currency_stub.DEFAULT_RATES)
    rates.update(dict(args.rate))
    currency_stub.serve(rates, args.host, args.port)
    return 0


def _rate_arg(text: str) -> tuple[str, Decimal]:
    from gateway.currency_stub import parse_pair_rate

    try:
        pair, rate = parse_pair_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    # Real rates lie far inside this (IDR/USD is about 0.00006); a rate outside it would
    # overflow the amounts it converts.
    if not STUB_RATES[0] <= rate <= STUB_RATES[1]:
        raise argparse.ArgumentTypeError(
            f"the rate of {pair} must be from {STUB_RATES[0]} to {STUB_RATES[1]}"
        )
    return pair, rate


#: The smallest and largest rate `gateway currency-stub --rate` quotes.
STUB_RATES = (Decimal("0.000000001"), Decimal("1000000000"))


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `sign` and `currency-stub`."""
    about = """Sign a request body the way the provider's scheme would and print the
    headers to send with it, or POST it with --send and print the gateway's answer (exit 1
    unless it is 2xx). For testing a deployment's secrets and for demos: with a scheme and
    --secret it needs no configuration file; with --provider it signs exactly as that
    configured provider is verified (the generic hmac scheme's settings included). A
    scheme that signs inside the body (adyen) prints the signed body after the headers.
    With --json: {"headers": {...}} (and "body", "status", "response")."""
    sign = sub.add_parser(
        "sign",
        help="Sign a body as a provider would; print the headers or send it.",
        parents=[common],
        **help_texts(
            about,
            (
                "gateway sign stripe --secret whsec_demo_stripe_secret --body event.json",
                "gateway sign stripe --secret whsec_demo_stripe_secret --body event.json "
                "--send http://127.0.0.1:8080/webhooks/stripe",
                "gateway sign --provider acme --config gateway.toml --body event.json",
                'echo \'{"action": "x"}\' | gateway sign github --secret s --body - '
                "--event-id d1 --event-type push",
            ),
        ),
    )
    sign.add_argument("scheme", nargs="?", choices=SCHEME_NAMES, help="the scheme to sign as")
    sign.add_argument("--secret", help="the signing secret (with a scheme)")
    sign.add_argument(
        "--provider",
        metavar="NAME",
        help="sign as the configured [providers.NAME] is verified: its scheme, settings "
        "and first secret (instead of a scheme and --secret)",
    )
    sign.add_argument("--url", help="the notification URL, for a scheme that signs it (square)")
    sign.add_argument("--body", required=True, help="file with the body, or - for stdin")
    sign.add_argument("--event-id", help="event id header value (github, shopify, standard)")
    sign.add_argument("--event-type", help="event type header value (github, shopify)")
    sign.add_argument("--send", metavar="URL", help="POST the signed body to URL, print the answer")
    sign.set_defaults(func=cmd_sign)

    about = """Run a stand-in for the currency-service on HTTP until stopped, quoting fixed
    rates (EUR/USD=1.08 and a few more by default). POST /control {"mode": "ok" | "fail" |
    "stall", "stall_s": N} makes it fail or stall, for demos, tests and fault drills. Not
    for production."""
    stub = sub.add_parser(
        "currency-stub",
        help="Run a stand-in currency-service for demos and tests.",
        parents=[common],
        **help_texts(
            about,
            (
                "gateway currency-stub",
                "gateway currency-stub --port 8091 --no-default-rates --rate EUR/USD=1.1",
            ),
        ),
    )
    stub.add_argument("--host", default="127.0.0.1", help="address to listen on")
    stub.add_argument("--port", type=LISTEN_PORT, default=8090, help="port to listen on")
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
