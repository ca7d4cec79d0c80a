"""(a) in the benchmark: the cheapest useful webhook endpoint, served exactly like the gateway.

It reads the whole body and answers 200 with a small JSON document, nothing else: no
signature check, no database, no broker. It is the ceiling the gateway is compared with,
so it runs under the same uvicorn settings as `gateway serve` (`gateway.ingest.app.server_options`,
with the default `[http]` limits).

    python -m bench.bare_app --port 8090 [--workers N]
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# The options `gateway serve` passes to uvicorn.run: a difference here would be measured
# as a difference between the apps.
from gateway.ingest.app import server_options
from gateway.settings import HttpSettings

SERVER_OPTIONS = server_options(HttpSettings())

# About the size of the gateway's `{"status":"accepted","event_id":...}` answer, so both
# send comparable responses.
_ANSWER = b'{"status":"ok","event_id":"evt_0000000000000000000000000"}'


async def receive(request: Request) -> Response:
    """Read the body (as the gateway must, to verify it) and answer 200."""
    await request.body()
    return Response(_ANSWER, 200, media_type="application/json")


app = Starlette(routes=[Route("/webhooks/{provider}", receive, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers > 1:
        # Several processes need an import string, as `gateway serve --workers` does.
        uvicorn.run(
            "bench.bare_app:app",
            host=args.host,
            port=args.port,
            workers=args.workers,
            **SERVER_OPTIONS,
        )
    else:
        uvicorn.run(app, host=args.host, port=args.port, **SERVER_OPTIONS)


if __name__ == "__main__":
    main()
