"""The checked-in OpenAPI document against the application that serves it, without a
server: it is valid OpenAPI 3.1, it lists exactly the operations the app routes, and it
names every header and refusal the code can produce. (What a running gateway answers is
checked in tests/integration/ingest/test_openapi_*.py.)"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import jsonschema_rs
import orjson
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator
from starlette.routing import Route

from gateway import errors
from gateway.core.bodies.content import has_control_chars
from gateway.core.events.model import service_event
from gateway.core.providers import PROVIDERS
from gateway.core.signatures import SchemeParams
from gateway.ingest.app import GatewayApp
from gateway.ingest.endpoints import EVENTS_PATH, WEBHOOKS_PREFIX
from gateway.ingest.parts import IngestParts
from gateway.settings import Settings, parse
from tests.support import openapi
from tests.support.gateway import config

DOC = openapi.load()
AT = datetime(2026, 1, 1, tzinfo=UTC)
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


@pytest.mark.parametrize("scheme", [s for s in PROVIDERS if s != "hmac"])
def test_every_fixed_schemes_headers_are_documented(scheme: str) -> None:
    """The webhook operation names each header a fixed scheme requires (hmac's are
    configured, and described in prose; Adyen signs inside the body)."""
    params = SchemeParams(secrets=("00",), url="https://gateway.example/webhooks/square")
    documented = {
        p["name"].lower()
        for p in DOC["paths"][WEBHOOKS]["post"]["parameters"]
        if p.get("in") == "header"
    }
    used = set(PROVIDERS[scheme].scheme.required_headers(params))
    used |= set(PROVIDERS[scheme].scheme.signature_headers(params))
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


# --- the request constraints: the document states exactly what the server enforces --------


def _schema_accepts(schema: Mapping[str, Any], value: object) -> bool:
    """jsonschema-rs's reading (schemathesis validates with it): ECMA-262 patterns, where
    `$` is the end of the text (Python's `re.search` also lets it match before a final
    newline)."""
    root = {"allOf": [schema], "components": DOC["components"]}
    return bool(jsonschema_rs.validator_for(root).is_valid(value))


def test_the_printable_pattern_is_the_servers_rule_for_every_code_point() -> None:
    """`PrintableText` is generated from `str.isprintable`, the test the server applies
    (`content.has_control_chars`), and both engines that read it here agree with the
    server on every code point: Python's `re` (schemathesis draws values with it) and
    jsonschema-rs. After a Python upgrade, regenerate it: `python -m tests.support.openapi`."""
    pattern = DOC["components"]["schemas"][openapi.PRINTABLE_SCHEMA]["pattern"]
    assert pattern == openapi.printable_pattern()
    every = "".join(map(chr, range(0x110000)))
    refused = {c for c in every if has_control_chars(c)}
    # `^[...]*$` takes a text made of its class's characters only: the class, found.
    python_class = re.compile(pattern.removeprefix("^").removesuffix("*$"))
    assert set(every) - set(python_class.findall(every)) == refused
    rust = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    # No Python str passed to jsonschema-rs may hold a surrogate.
    wrong = [hex(ord(c)) for c in every if not "\ud800" <= c <= "\udfff"
             and rust.is_valid(c) == (c in refused)]  # fmt: skip
    assert wrong == []


TYPES = ["a", "invoice.paid", " a ", "a b", "a" * 200, "a" * 201, "", " ", "   ", "a\tb",
         "a\nb", "a\n", "\x00", "a\x7f", "\x85", "\u00a0", "\u00ad", "\u200b", "\u202e",
         "\u2028", "\u3000", "\ue000", "\U000906fb", "\U000e0001", "é", "日本", "😀",
         "\u017f", "a/b.c*>"]  # fmt: skip


@pytest.mark.parametrize("event_type", TYPES, ids=repr)
def test_an_event_type_is_valid_in_the_document_exactly_when_the_server_takes_it(
    event_type: str,
) -> None:
    body = orjson.dumps({"type": event_type, "data": {}})
    try:
        service_event("svc", ("events.svc.>",), "k", {}, body, AT)
        taken = True
    except errors.BadRequest:
        taken = False
    schema = DOC["components"]["schemas"]["InternalEvent"]
    assert _schema_accepts(schema, {"type": event_type, "data": {}}) is taken


KEYS = ["k", "evt-1", "a b", "k" * 255, "k" * 256, "a\tb", "\xa0k", "k\x85", "\x7f", "\xad",
        "é", "ÿ", "Ã©", "k\x00", "\x1b[2J"]  # fmt: skip


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_an_idempotency_key_is_valid_in_the_document_exactly_when_the_server_takes_it(
    key: str,
) -> None:
    """The header as the server reads it: octets as ISO-8859-1, the spaces and tabs around
    the value already removed by HTTP."""
    try:
        service_event("svc", ("events.svc.>",), key, {}, b'{"type": "a", "data": {}}', AT)
        taken = True
    except errors.BadRequest:
        taken = False
    schema = DOC["components"]["parameters"]["IdempotencyKey"]["schema"]
    assert _schema_accepts(schema, key) is taken


NAMES = ["stripe", "a-b_c", "A1", "_", "-", "_-", "service", "services", "a.b", "a:b", "é",
         "a b", "x" * 300]  # fmt: skip


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_a_provider_name_is_valid_in_the_document_exactly_when_it_can_be_configured(
    name: str,
) -> None:
    """A name the document refuses can never be configured (so it is always a 404)."""
    doc = config("postgresql://127.0.0.1/unused", "nats://127.0.0.1:1")
    doc["providers"] = {name: {"scheme": "stripe", "secrets": ["x"]}}
    try:
        parse(doc, env={})
        configurable = True
    except errors.ConfigError:
        configurable = False
    schema = DOC["paths"][WEBHOOKS]["post"]["parameters"][0]["schema"]
    assert _schema_accepts(schema, name) is configurable
