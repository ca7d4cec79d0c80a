"""`scripts/run.sh`'s check before it starts anything: the config loads, and every port
the three processes will listen on is free.

Prints the currency stub's host and port (from `currency.url`) and the console's
`host:port` on success. Otherwise one line on
stderr naming the port and the setting it comes from, and exit status 1 (2 for a bad
configuration, as every `gateway` command).

    python scripts/run_preflight.py CONFIG
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlsplit

from gateway import settings as settings_mod
from gateway.errors import ConfigError


def port_taken(host: str, port: int) -> bool:
    """True if something listens on host:port (a bind as the servers do fails)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As uvicorn and asyncio servers bind: TIME_WAIT leftovers do not count as taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def listeners(config: settings_mod.Settings) -> list[tuple[str, int, str, str]]:
    """(host, port, setting, process) of every listener `make run` starts."""
    stub = urlsplit(config.currency.url)
    found = [
        (config.http.host, config.http.port, "http.port", "gateway serve"),
        (stub.hostname or "127.0.0.1", stub.port or 80, "currency.url", "the currency stub"),
    ]
    console = config.console
    found.append((console.host, console.port, "console.port", "gateway console"))
    if config.http.admin_port:
        found.append(
            (config.http.admin_host, config.http.admin_port, "http.admin_port", "gateway serve")
        )
    metrics_port = config.settlement.metrics_port
    if metrics_port:
        host = config.settlement.metrics_host
        found.append((host, metrics_port, "settlement.metrics_port", "gateway settle"))
    return found


def main(argv: list[str]) -> int:
    """Check `argv[1]`'s listeners; print the stub's host and port."""
    path = argv[1]
    try:
        config = settings_mod.load(path)
    except ConfigError as exc:
        print(f"run: {path}: {exc}", file=sys.stderr)
        return 2
    for host, port, setting, process in listeners(config):
        if port_taken(host, port):
            print(
                f"run: port {port} ({setting} in {path}, for {process}) is already in use "
                f"on {host}: stop what listens there or change {setting}",
                file=sys.stderr,
            )
            return 1
    stub = urlsplit(config.currency.url)
    print(
        stub.hostname or "127.0.0.1",
        stub.port or 80,
        f"{config.console.host}:{config.console.port}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
