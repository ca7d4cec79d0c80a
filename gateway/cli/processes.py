"""The long-running processes and their set-up: `migrate`, `serve`, `relay`, `settle`,
`confirm`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import settings as settings_mod
from gateway.cli.common import (
    LISTEN_PORT,
    OPTIONAL_PORT,
    Number,
    SubParsers,
    help_texts,
    load_settings,
)
from gateway.cli.format import print_json
from gateway.settings.secrets import EVERY_SECRET

if TYPE_CHECKING:
    from gateway.metrics import ListenAddress

log = logging.getLogger(__name__)


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.wiring.schema import migrate_database, migrate_stream

    settings = load_settings(args)
    applied = asyncio.run(migrate_database(settings))
    if not args.json:  # said before the stream is tried: these are applied either way
        print(f"applied {len(applied)} migration(s){': ' + ', '.join(applied) if applied else ''}")
    # The one command that creates or changes the stream; every other process only checks.
    change = asyncio.run(migrate_stream(settings))
    if args.json:
        print_json({"applied": applied, "stream": change.to_json()})
    else:
        print(change.line())
    return 0


#: uvicorn's exit status when the application's start-up failed.
STARTUP_FAILURE = 3


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from gateway.edge import raise_file_limit
    from gateway.ingest.app import server_options
    from gateway.wiring.durability import check_required_durability
    from gateway.wiring.schema import check_stream
    from gateway.wiring.sockets import bound_socket, check_free

    # Every secret, validated before forking anything: serve verifies every provider's
    # signatures, authenticates every service and runs their scheduled backfills.
    settings = load_settings(args, EVERY_SECRET)
    http = settings.http
    host = args.host or http.host
    port = args.port or http.port
    # 1. The ports, before anything starts: a taken one is one line naming its setting.
    # The public socket is bound here and handed to uvicorn (and shared by the workers);
    # the admin port, which each worker binds for itself, is only checked.
    sock = bound_socket(host, port, "--port" if args.port else "http.port")
    try:
        if http.admin_port:
            check_free(http.admin_host, http.admin_port, "http.admin_port")
        # 2. The stream: created when missing; one that differs stops start-up here.
        asyncio.run(check_stream(settings))
        # 3. With `require_synchronous_standby`, a database that does not meet it stops
        # start-up here, in one line (each worker also reads it, and warns).
        asyncio.run(check_required_durability(settings))
        raise_file_limit(http)  # before forking: workers inherit it
        options: dict[str, Any] = dict(host=host, port=port, **server_options(http))
        log.info("listening", extra={"host": host, "port": sock.getsockname()[1]})
        if args.workers > 1:
            return _serve_workers(args, options, sock, Multiprocess)
        from gateway.wiring.ingest import create_app

        server = uvicorn.Server(uvicorn.Config(create_app(settings, own_process=True), **options))
        server.run(sockets=[sock])
        return 0 if server.started else STARTUP_FAILURE
    finally:
        sock.close()


def _serve_workers(
    args: argparse.Namespace, options: dict[str, Any], sock: socket.socket, supervisor: Any
) -> int:
    """`--workers N`: uvicorn's supervisor, each worker serving on the one bound socket."""
    import uvicorn

    from gateway.metrics import multiprocess_dir

    # Each worker process builds its own app from the same file.
    config = getattr(args, "config", None)
    os.environ[settings_mod.CONFIG_ENV] = (
        str(Path(config).resolve()) if config else os.environ[settings_mod.CONFIG_ENV]
    )
    # The workers write their metrics to one private directory of this run, so a
    # scrape of any of them sees the figures of all (removed when serving ends).
    with multiprocess_dir():
        uv_config = uvicorn.Config(
            "gateway.wiring.ingest:app_from_env", factory=True, workers=args.workers, **options
        )
        supervisor(uv_config, sockets=[sock]).run()
    return 0


def metrics_address(
    args: argparse.Namespace, configured: ListenAddress, flag: str = "--metrics-port"
) -> ListenAddress:
    """The configured /metrics address, with `--metrics-host`/`--metrics-port` over it
    (several relays or workers on one host, one config file)."""
    from gateway.metrics import ListenAddress

    if args.metrics_host is None and args.metrics_port is None:
        return configured
    return ListenAddress(
        args.metrics_host or configured.host,
        configured.port if args.metrics_port is None else args.metrics_port,
        configured.setting if args.metrics_port is None else flag,
    )


def cmd_relay(args: argparse.Namespace) -> int:
    from gateway.wiring.ingest import relay_metrics_address, run_relay
    from gateway.wiring.signals import run_until_signalled

    settings = load_settings(args)
    listen = metrics_address(args, relay_metrics_address(settings))
    run_until_signalled(lambda: run_relay(settings, listen))
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    from gateway.wiring.settlement import run_settlement, settle_metrics_address
    from gateway.wiring.signals import run_until_signalled

    settings = load_settings(args)
    listen = metrics_address(args, settle_metrics_address(settings))
    run_until_signalled(lambda: run_settlement(settings, listen))
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    from gateway.settings.secrets import secrets_under
    from gateway.wiring.confirm import confirm_metrics_address, run_confirm
    from gateway.wiring.signals import run_until_signalled

    # The API keys of the providers it confirms, and no other secret.
    providers = load_settings(args).providers.items()
    names = [name for name, p in providers if p.confirmation is not None]
    settings = load_settings(args, secrets_under(*(f"providers.{n}.api_key_env" for n in names)))
    listen = metrics_address(args, confirm_metrics_address(settings))
    run_until_signalled(lambda: run_confirm(settings, listen))
    return 0


#: Each worker holds its own database pool and NATS connection.
MAX_WORKERS = 64
WORKERS = Number(1, MAX_WORKERS)


def add_metrics_flags(parser: argparse.ArgumentParser, host_key: str, port_key: str) -> None:
    """`--metrics-host` and `--metrics-port`, over the config's `host_key` and `port_key`."""
    parser.add_argument(
        "--metrics-host",
        default=None,
        metavar="HOST",
        help=f"/metrics listen address (default: {host_key})",
    )
    parser.add_argument(
        "--metrics-port",
        type=OPTIONAL_PORT,
        default=None,
        metavar="PORT",
        help=f"/metrics port, 0 = off (default: {port_key})",
    )


def add_commands(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """Mount `migrate`, `serve`, `relay`, `settle` and `confirm`."""

    def command(
        name: str, summary: str, about: str, examples: tuple[str, ...]
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=summary, parents=[common], **help_texts(about, examples)
        )
        return p

    command(
        "migrate",
        "Create or upgrade the database tables and the stream (safe to run again).",
        """Apply the SQL migrations shipped with the gateway that the database has not
        seen yet, in order, each in its own transaction, and print their names. Running it
        again applies nothing; several processes may run it at once. Exits 1 when the
        installation carries no migrations at all. Then create the NATS stream
        ([nats] stream), or bring its subjects, retention, storage, duplicate window and
        replicas to the configured values, and say what changed: the one command that
        changes a stream (serve, relay and settle refuse one that differs). With --json:
        {"applied": [names], "stream": {"name", "action", "changes"}}.""",
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
    serve.add_argument("--port", type=LISTEN_PORT, help="listen port (default: http.port)")
    serve.add_argument(
        "--workers",
        type=WORKERS,
        default=1,
        help=f"worker processes (default 1, at most {MAX_WORKERS})",
    )
    serve.set_defaults(func=cmd_serve)
    relay = command(
        "relay",
        "Publish recorded events that have not reached NATS yet.",
        """Run only the outbox relay until stopped: publish every recorded event whose
        publish was not confirmed (with [outbox] inline = false, every recorded event).
        Any number of relays may run at once; they share one cursor and sweep in turn. Serves
        /metrics on [outbox] relay_metrics_host:relay_metrics_port (127.0.0.1:9103; 0 =
        off): give a second relay on the same host its own --metrics-port.""",
        (
            "gateway relay --config gateway.toml",
            "gateway relay --config gateway.toml --metrics-port 9104   # a second one here",
        ),
    )
    add_metrics_flags(relay, "outbox.relay_metrics_host", "outbox.relay_metrics_port")
    relay.set_defaults(func=cmd_relay)
    settle = command(
        "settle",
        "Run the settlement worker (JetStream consumer 'settlement').",
        """Consume payment events from the stream until stopped: convert the currency,
        post an idempotent transfer to the ledger, retry transient failures with backoff
        and park permanent ones in the dead-letter table. Serves /metrics on [settlement]
        metrics_host:metrics_port (127.0.0.1:9102; 0 = off): give a second worker on the
        same host its own --metrics-port.""",
        (
            "gateway settle --config gateway.toml --log-level WARNING",
            "gateway settle --config gateway.toml --metrics-port 0   # no /metrics listener",
        ),
    )
    add_metrics_flags(settle, "settlement.metrics_host", "settlement.metrics_port")
    settle.set_defaults(func=cmd_settle)
    confirm = command(
        "confirm",
        "Fetch what webhooks only name (Mollie classic) and record the events found.",
        """Run the confirm stage until stopped: for each recorded webhook that only names
        an object (a Mollie classic id=tr_...), fetch the object from the provider's
        API ([providers.NAME] api_key_env, api_url), record the changes it holds as
        events of their own (a change already seen is a duplicate), and publish them
        through the outbox. Paced per provider by [confirm] rate_per_s and concurrency;
        transient answers are tried again, then parked at stage 'confirm' (replay with
        'gateway dlq replay'). Pending fetches wait in the database: any number may run,
        and a restart resumes them. Serves /metrics on [confirm]
        metrics_host:metrics_port (0 = off).""",
        (
            "gateway confirm --config gateway.toml",
            "gateway confirm --config gateway.toml --metrics-port 9105",
        ),
    )
    add_metrics_flags(confirm, "confirm.metrics_host", "confirm.metrics_port")
    confirm.set_defaults(func=cmd_confirm)
