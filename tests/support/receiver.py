"""A real HTTP server standing in for an alert webhook (Slack, PagerDuty)."""

from __future__ import annotations

from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.services import free_port


class Receiver:
    """A real HTTP server standing in for Slack/PagerDuty: records what it is sent."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.fail_next = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/T000/SECRET"

        async def hook(request: Request) -> Response:
            if self.fail_next:
                self.fail_next -= 1
                return Response(status_code=500)
            self.received.append(await request.json())
            return Response("ok")

        app = Starlette(routes=[Route("/hooks/T000/SECRET", hook, methods=["POST"])])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off")
        )

    def statuses(self) -> list[tuple[str, str, str]]:
        return [(m["alert"], m["key"], m["status"]) for m in self.received]
