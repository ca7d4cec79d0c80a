"""`gateway serve`'s listening ports, taken before anything else starts.

uvicorn binds its port only after the application's start-up: a port already taken was
found after the database pool, NATS and the relay had started, and reported as a stack
in the logs with exit 3. Binding first makes it one line naming the setting, exit 2, as
`gateway relay` and `gateway settle` report their /metrics port.
"""

from __future__ import annotations

import errno
import socket

from gateway.errors import ConfigError


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _refusal(host: str, port: int, setting: str, exc: OSError) -> ConfigError:
    if exc.errno == errno.EADDRINUSE:
        problem = (
            f"port {port} is already in use on {host} (stop what listens there, or choose another)"
        )
    else:
        problem = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return ConfigError(setting, problem)


def bound_socket(host: str, port: int, setting: str) -> socket.socket:
    """A TCP socket bound to host:port (not yet listening), as uvicorn binds its own
    (`SO_REUSEADDR`, so connections in TIME_WAIT do not count as taken), handed to the
    server and shared by every worker of `--workers N`. A port that cannot be bound
    raises `ConfigError` naming `setting`."""
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise _refusal(host, port, setting, exc) from None
    sock.set_inheritable(True)  # the workers of `--workers N` are spawned with it
    return sock


def check_free(host: str, port: int, setting: str) -> None:
    """Raise `ConfigError` naming `setting` if host:port cannot be bound now.

    For the admin port, which each worker binds itself (`SO_REUSEPORT`, so they share
    it): the probe binds without `SO_REUSEPORT`, so that another process's listener
    counts as taken even when it shares ports too.
    """
    bound_socket(host, port, setting).close()
