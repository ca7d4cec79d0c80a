"""`GET /console/api/v1/openapi.json`: the admin API's OpenAPI 3.1 document, merged from
each area's fragment in `gateway/console/openapi/*.json` (`{"paths", "components"}`).

`_common.json` holds what every area refers to: the `Problem` schema and the
`BadRequest`, `Unauthorized`, `Forbidden`, `NotFound` and `Conflict` responses, and
the answers of the server's edge (`gateway.edge`), which every operation may get. A
component defined twice must be defined the same way (`FragmentClash` otherwise)."""

from __future__ import annotations

import functools
import importlib.resources
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

import gateway
from gateway.console.guard import needs
from gateway.console.web import Principal
from gateway.core.console.roles import Capability

OPENAPI_PATH = "/console/api/v1/openapi.json"


#: What the server's edge may answer any request before the console sees it.
EDGE_RESPONSES = {
    "408": "EdgeTimeout",
    "429": "TooManyFailures",
    "431": "EdgeTooLarge",
    "503": "EdgeFull",
}
_EDGE = {
    status: {"$ref": f"#/components/responses/{name}"} for status, name in EDGE_RESPONSES.items()
}


class FragmentClash(ValueError):
    """Two fragments define the same path operation or schema differently."""


def merge(fragments: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One document from the fragments (by file name, merged in name order)."""
    paths: dict[str, dict[str, Any]] = {}
    components: dict[str, dict[str, Any]] = {}
    for source in sorted(fragments):
        fragment = fragments[source]
        for path, operations in fragment.get("paths", {}).items():
            merged = paths.setdefault(path, {})
            for method, operation in operations.items():
                if method in merged and merged[method] != operation:
                    raise FragmentClash(f"{source}: {method.upper()} {path} defined twice")
                answers = {**_EDGE, **operation.get("responses", {})}
                merged[method] = {**operation, "responses": answers}
        for kind, entries in fragment.get("components", {}).items():
            merged_kind = components.setdefault(kind, {})
            for name, entry in entries.items():
                if name in merged_kind and merged_kind[name] != entry:
                    raise FragmentClash(f"{source}: {kind} {name} defined twice, differently")
                merged_kind[name] = entry
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Payments webhook gateway: console admin API",
            "version": gateway.__version__,
            "description": (
                "The operator console's JSON API. Authenticate with "
                "`Authorization: Bearer <token>` (`gateway console token create`). Lists "
                "answer `{items, next_cursor}`; errors are `application/problem+json`."
            ),
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            **{kind: dict(sorted(entries.items())) for kind, entries in sorted(components.items())},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def read_fragments() -> dict[str, dict[str, Any]]:
    folder = importlib.resources.files("gateway.console") / "openapi"
    found: dict[str, dict[str, Any]] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            found[entry.name] = json.loads(entry.read_text(encoding="utf-8"))
    return found


@functools.cache
def document() -> dict[str, Any]:
    """The merged document (read once per process)."""
    return merge(read_fragments())


@needs(Capability.VIEW)
async def openapi(request: Request, principal: Principal) -> Response:
    return JSONResponse(document())


ROUTES: list[BaseRoute] = [Route(OPENAPI_PATH, openapi, methods=["GET"])]
