"""`[console]`: where the operator console listens and how long its sessions live."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConsoleSettings:
    """The operator console (`gateway console`)."""

    #: The address the console binds. Anything but a loopback address needs
    #: authentication configured (a token issued, or `trusted_proxies`): the console
    #: refuses to start otherwise.
    host: str = "127.0.0.1"
    #: The console's port.
    #: allowed: 1 to 65535
    port: int = 8070
    #: The console's origin as browsers see it (`https://console.example.com`), compared
    #: with `Origin` on unsafe requests. Empty: `http://host:port`.
    public_origin: str = ""
    #: A session ends this long after its login, used or not.
    #: allowed: 60 to 28800 (8 h)
    session_max_s: int = 28_800
    #: A session ends after this long without a request.
    #: allowed: 60 to 1800 (30 min)
    session_idle_s: int = 1_800
    #: Failed logins from one address within a minute before the answer is `429`.
    #: allowed: 1 to 100
    login_failures_per_min: int = 5
    #: Failed requests with one bearer token from one address within a minute before
    #: the API answers `429` to that token (never to another token from there).
    #: allowed: 1 to 10000
    bearer_failures_per_min: int = 20
    #: Connections the console holds at once; past it a new request is answered `503`.
    #: Its other limits are `[http]`'s, as `gateway serve` has them: the head and body
    #: deadlines, the head's size, the keep-alive and pipelining bounds.
    #: allowed: 1 to 10000
    max_connections: int = 100
    #: Addresses of SSO proxies whose identity headers are trusted; from any other
    #: address the headers are ignored. Empty: proxy sign-in off.
    trusted_proxies: tuple[str, ...] = ()
    #: The header a trusted proxy names the user in.
    proxy_user_header: str = "X-Forwarded-User"
    #: The header a trusted proxy names the user's role in (one of the four roles).
    proxy_role_header: str = "X-Forwarded-Role"
    #: The address `gateway dlq run-jobs` (the runner of the console's replay jobs)
    #: serves `/metrics`, `/livez` and `/readyz` on.
    jobs_metrics_host: str = "127.0.0.1"
    #: That listener's port; 0: none. Off by default, as any number of runners may run
    #: on one host: give each its own (or `--metrics-port`).
    #: allowed: 0 to 65535
    jobs_metrics_port: int = 0
