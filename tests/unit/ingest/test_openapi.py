"""The checked-in OpenAPI document against the application that serves it, without a
server: it is valid OpenAPI 3.1, it lists exactly the operations the app routes, and it
names every header and refusal the code can produce. (What a running gateway answers is
checked in tests/integration/ingest/test_openapi_*.py.)"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator
from starlette.routing import Route

from gateway import errors
from gateway.core.signatures import SCHEMES, SchemeParams
from gateway.ingest.app import GatewayApp
from gateway.ingest.endpoints import EVENTS_PATH, WEBHOOKS_PREFIX
from gateway.ingest.parts import IngestParts
from gateway.settings import Settings, parse
from tests.support import openapi
from tests.support.gateway import config

DOC = openapi.load()
WEBHOOKS = f"{WEBHOOKS_PREFIX}{{provider}}"


def _never_run(settings: Settings) -> AbstractAsyncContextManager[IngestParts]:
    raise AssertionError("the lifespan is not run here")


def app_operations(admin_port: int = 0) -> set[tuple[str, str]]:
    """(path, METHOD) of every route the app answers, the two ASGI endpoints included.

    HEAD, which Starlette adds to every GET route, is left out: the document lists GETs.
    """
    doc = config("postgresql://127.0.0.1/unused", "nats://127.0.0.1:1", http={})
    if admin_port:
        doc["http"] = {**doc["http"], "admin_port": admin_port}
    app = GatewayApp(parse(doc, env={}), _never_run)
    found = {(WEBHOOKS, "POST"), (EVENTS_PATH, "POST")}  # served before Starlette is asked
    for route in app.starlette.routes:
        assert isinstance(route, Route)
        found |= {(route.path, m) for m in route.methods or () if m != "HEAD"}
    return found


def test_the_document_is_valid_openapi_3_1() -> None:
    """openapi-spec-validator finds nothing wrong, and it says it is 3.1."""
    assert DOC["openapi"].startswith("3.1.")
    errors_found = [e.message for e in OpenAPIV31SpecValidator(DOC).iter_errors()]
    assert errors_found == []


def test_every_route_is_documented_and_every_documented_operation_is_routed() -> None:
    """Adding a route or an operation to one side only fails here."""
    assert app_operations() == openapi.operations(DOC)


def test_with_an_admin_port_the_public_routes_are_a_documented_subset() -> None:
    """/readyz and /metrics move to the admin listener; the document lists their 404."""
    public = app_operations(admin_port=9901)
    assert public < openapi.operations(DOC)
    for path, method in openapi.operations(DOC) - public:
        assert "404" in openapi.responses(DOC, path, method), path


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s != "hmac"])
def test_every_fixed_schemes_headers_are_documented(scheme: str) -> None:
    """The webhook operation names each header a fixed scheme requires (hmac's are
    configured, and described in prose)."""
    params = SchemeParams(secrets=("x",))
    documented = {
        p["name"].lower()
        for p in DOC["paths"][WEBHOOKS]["post"]["parameters"]
        if p.get("in") == "header"
    }
    used = set(SCHEMES[scheme].required_headers(params))
    used |= set(SCHEMES[scheme].signature_headers(params))
    assert used <= documented


def _leaf_refusals() -> list[type[errors.RequestRejected]]:
    found, todo = [], [errors.RequestRejected]
    while todo:
        cls = todo.pop()
        subclasses = cls.__subclasses__()
        todo += subclasses
        if not subclasses:
            found.append(cls)
    return found


@pytest.mark.parametrize("refusal", _leaf_refusals(), ids=lambda c: c.__name__)
def test_every_refusal_the_code_can_raise_is_documented(
    refusal: type[errors.RequestRejected],
) -> None:
    """A refusal's status, and its `error` value under that status, are in the document
    for at least one ingestion operation."""
    name = refusal.error_class.lower()
    allowed = set()
    for path in (WEBHOOKS, EVENTS_PATH):
        response = openapi.responses(DOC, path, "POST").get(str(refusal.status_code))
        if response is None:
            continue
        schema = openapi.resolve(DOC, response["content"]["application/json"]["schema"])
        allowed |= set(schema["properties"]["error"]["enum"])
    assert name in allowed, f"{refusal.__name__}: {refusal.status_code} {name!r} undocumented"
