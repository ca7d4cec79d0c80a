"""The long-running processes and their set-up: `migrate`, `serve`, `relay`, `settle`."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from gateway import settings as settings_mod
from gateway.cli.common import SubParsers, help_texts, load_settings, print_json


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.adapters.postgres import migrate

    applied = asyncio.run(migrate(load_settings(args).database_url))
    if args.json:
        print_json({"applied": applied})
    else:
        print(f"applied {len(applied)} migration(s){': ' + ', '.join(applied) if applied else ''}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.ingest.app import server_options
    from gateway.ingest.edge import raise_file_limit

    settings = load_settings(args)  # validate before forking anything
    host = args.host or settings.http.host
    port = args.port or settings.http.port
    raise_file_limit(settings.http)  # before forking: workers inherit it
    options: dict[str, Any] = dict(host=host, port=port, **server_options(settings.http))
    if args.workers > 1:
        # Each worker process builds its own app from the same file.
        config = getattr(args, "config", None)
        os.environ[settings_mod.CONFIG_ENV] = (
            str(Path(config).resolve()) if config else os.environ[settings_mod.CONFIG_ENV]
        )
        uvicorn.run(
            "gateway.compose.ingest:app_from_env", factory=True, workers=args.workers, **options
        )
    else:
        from gateway.compose.ingest import create_app

        uvicorn.run(create_app(settings), **options)
    return 0


def cmd_relay(args: argparse.Namespace) -> int:
    from gateway.compose.ingest import running_relay
    from gateway.compose.signals import run_until_signalled
    from gateway.metrics import Metrics

    settings = load_settings(args)

    async def main() -> None:
        async with running_relay(settings, Metrics()):
            await asyncio.Event().wait()

    run_until_signalled(main)
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    from gateway.compose.settlement import run_settlement
    from gateway.compose.signals import run_until_signalled

    settings = load_settings(args)
    run_until_signalled(lambda: run_settlement(settings))
    return 0


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `migrate`, `serve`, `relay` and `settle`."""

    def command(
        name: str, summary: str, about: str, examples: tuple[str, ...]
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=summary, parents=[common], **help_texts(about, examples)
        )
        return p

    command(
        "migrate",
        "Create or upgrade the database tables (safe to run again).",
        """Apply the SQL migrations shipped with the gateway that the database has not
        seen yet, in order, each in its own transaction, and print their names. Running it
        again applies nothing; several processes may run it at once. Exits 1 when the
        installation carries no migrations at all. With --json: {"applied": [names]}.""",
        (
            "gateway migrate --config /etc/gateway/gateway.toml",
            "GATEWAY_DATABASE_URL=postgresql://db.internal/gateway gateway migrate "
            "--config gateway.toml --json",
        ),
    ).set_defaults(func=cmd_migrate)
    serve = command(
        "serve",
        "Receive webhooks over HTTP: verify, record once, answer, publish.",
        """Run the HTTP receiver (POST /webhooks/PROVIDER, POST /v1/events, /healthz,
        /readyz, /metrics) with its inline publisher and outbox relay until SIGINT or
        SIGTERM; a second signal forces exit. With [outbox] inline = false it only
        receives and records: run 'gateway relay' beside it.""",
        (
            "gateway serve --config gateway.toml",
            "gateway serve --config gateway.toml --host 0.0.0.0 --port 8080 --workers 4",
        ),
    )
    serve.add_argument("--host", help="listen address (default: http.host)")
    serve.add_argument("--port", type=int, help="listen port (default: http.port)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.set_defaults(func=cmd_serve)
    command(
        "relay",
        "Publish recorded events that have not reached NATS yet.",
        """Run only the outbox relay until stopped: publish every recorded event whose
        publish was not confirmed (with [outbox] inline = false, every recorded event).
        Any number of relays may run at once; each row is claimed by one of them.""",
        ("gateway relay --config gateway.toml",),
    ).set_defaults(func=cmd_relay)
    command(
        "settle",
        "Run the settlement worker (JetStream consumer 'settlement').",
        """Consume payment events from the stream until stopped: convert the currency,
        post an idempotent transfer to the ledger, retry transient failures with backoff
        and park permanent ones in the dead-letter table.""",
        ("gateway settle --config gateway.toml --log-level WARNING",),
    ).set_defaults(func=cmd_settle)
