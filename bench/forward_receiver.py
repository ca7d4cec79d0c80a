"""A target for the forwarding benchmark that answers every POST `200` at once and
remembers each delivery's `webhook-id`; `GET /count` says how many it got and how many
distinct. Run as its own process, so the forwarder's CPU is measured alone.

    python -m bench.forward_receiver --port PORT
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson
import uvicorn

Scope = dict[str, Any]


class Receiver:
    """The ASGI app: counts POSTs by `webhook-id`."""

    def __init__(self) -> None:
        self.posts = 0
        self.ids: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "POST":
            more = True
            while more:  # read the body through, as a real handler would
                message = await receive()
                more = message.get("more_body", False)
            self.posts += 1
            for name, value in scope["headers"]:
                if name == b"webhook-id":
                    self.ids.add(value)
            body = b"ok"
        else:
            body = orjson.dumps({"posts": self.posts, "distinct": len(self.ids)})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        Receiver(),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
