"""The `gateway` command: serve, relay, migrate, sign (and the operations commands)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from gateway import logs
from gateway import settings as settings_mod
from gateway.errors import ConfigError, GatewayError

Command = Callable[[argparse.Namespace], int]


def _settings(args: argparse.Namespace) -> settings_mod.Settings:
    return settings_mod.load(args.config)


def run_until_signalled(main: Callable[[], Awaitable[None]]) -> None:
    """Run `main` until it returns or SIGINT/SIGTERM arrives; a second signal forces exit.

    The long-running commands (`relay`, `settle`) run on uvloop, as `serve` does, when it
    is installed (uvicorn[standard] brings it): they spend most of their time in the
    event loop and socket I/O, where the default loop cost the relay about a fifth more
    CPU per message.
    """
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        signals = {"count": 0}

        def on_signal() -> None:
            signals["count"] += 1
            if signals["count"] > 1:
                os._exit(130)  # the operator insists: stop now, as uvicorn does
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(runner())


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.adapters.postgres import migrate

    applied = asyncio.run(migrate(_settings(args).database_url))
    print(f"applied {len(applied)} migration(s){': ' + ', '.join(applied) if applied else ''}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = _settings(args)  # validate before forking anything
    host = args.host or settings.http.host
    port = args.port or settings.http.port
    from gateway.http import SERVER_OPTIONS

    options: dict[str, Any] = dict(host=host, port=port, **SERVER_OPTIONS)
    if args.workers > 1:
        # Each worker process builds its own app from the same file.
        os.environ[settings_mod.CONFIG_ENV] = (
            str(Path(args.config).resolve()) if args.config else os.environ[settings_mod.CONFIG_ENV]
        )
        uvicorn.run("gateway.http:app_from_env", factory=True, workers=args.workers, **options)
    else:
        from gateway.http import create_app

        uvicorn.run(create_app(settings), **options)
    return 0


def cmd_relay(args: argparse.Namespace) -> int:
    from gateway.compose import running_relay
    from gateway.metrics import Metrics

    settings = _settings(args)

    async def main() -> None:
        async with running_relay(settings, Metrics()):
            await asyncio.Event().wait()

    run_until_signalled(main)
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    import time

    import httpx

    from gateway.core.signatures.base import SchemeParams
    from gateway.signing import sign

    body = sys.stdin.buffer.read() if args.body == "-" else Path(args.body).read_bytes()
    params = SchemeParams(secrets=(args.secret,))
    headers = sign(
        args.scheme,
        params,
        body,
        int(time.time()),
        event_id=args.event_id,
        event_type=args.event_type,
    )
    if not args.send:
        for name, value in headers.items():
            print(f"{name}: {value}")
        return 0
    headers["Content-Type"] = "application/json"
    response = httpx.post(args.send, content=body, headers=headers, timeout=10)
    print(f"{response.status_code} {response.text}")
    return 0 if response.is_success else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    parser.add_argument("--log-level", default=os.environ.get("GATEWAY_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Command, help_text: str, config: bool = True
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if config:
            p.add_argument(
                "--config", help=f"TOML config file (default: ${settings_mod.CONFIG_ENV})"
            )
        p.set_defaults(func=func)
        return p

    command("migrate", cmd_migrate, "Apply database migrations (idempotent, safe concurrently).")
    serve = command("serve", cmd_serve, "Run the HTTP receiver, inline publisher and outbox relay.")
    serve.add_argument("--host", help="listen address (default: http.host)")
    serve.add_argument("--port", type=int, help="listen port (default: http.port)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    command(
        "relay",
        cmd_relay,
        "Run only the outbox relay (any number may run at once; with [outbox] inline = false "
        "it publishes every recorded event).",
    )
    sign = command(
        "sign", cmd_sign, "Sign a body the way a provider would; print or send it.", config=False
    )
    sign.add_argument("scheme", choices=settings_mod.SCHEME_NAMES)
    sign.add_argument("--secret", required=True, help="the signing secret")
    sign.add_argument("--body", required=True, help="file with the body, or - for stdin")
    sign.add_argument("--event-id", help="event id header value (github, shopify, standard)")
    sign.add_argument("--event-type", help="event type header value (github, shopify)")
    sign.add_argument("--send", metavar="URL", help="POST the signed body to URL, print the answer")
    for extend in _extensions():
        extend(sub)
    return parser


def _extensions() -> list[Callable[[Any], object]]:
    """Sub-commands defined beside the parts they run (settle, ledger, dlq, ...)."""
    from gateway import currency_stub, dlq, ledger_ops, reconcile, worker

    return [
        worker.add_cli,
        ledger_ops.add_cli,
        dlq.add_cli,
        reconcile.add_cli,
        currency_stub.add_cli,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    os.environ["GATEWAY_LOG_LEVEL"] = args.log_level  # for worker processes of `serve`
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    except GatewayError as exc:
        print(f"gateway: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
