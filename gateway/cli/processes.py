"""The long-running processes and their set-up: `migrate`, `serve`, `relay`, `settle`."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from gateway import settings as settings_mod
from gateway.cli.common import SubParsers, load_settings


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.adapters.postgres import migrate

    applied = asyncio.run(migrate(load_settings(args).database_url))
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

    def command(name: str, text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=text, description=text, parents=[common]
        )
        return p

    command("migrate", "Apply database migrations (idempotent, safe concurrently).").set_defaults(
        func=cmd_migrate
    )
    serve = command("serve", "Run the HTTP receiver, inline publisher and outbox relay.")
    serve.add_argument("--host", help="listen address (default: http.host)")
    serve.add_argument("--port", type=int, help="listen port (default: http.port)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.set_defaults(func=cmd_serve)
    command(
        "relay",
        "Run only the outbox relay (any number may run at once; with [outbox] inline = false "
        "it publishes every recorded event).",
    ).set_defaults(func=cmd_relay)
    command("settle", "Run the settlement worker (JetStream consumer).").set_defaults(
        func=cmd_settle
    )
