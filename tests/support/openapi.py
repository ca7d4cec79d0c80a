"""The checked-in OpenAPI document, read the way the contract tests need it: which
operations it lists, and whether one answer is one it documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from openapi_schema_validator import OAS31Validator

from gateway.ingest.app import openapi_document

#: The HTTP methods an OpenAPI path item can hold, in the document's spelling.
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

Document = dict[str, Any]


def load() -> Document:
    doc: Document = orjson.loads(openapi_document())
    return doc


def operations(doc: Document) -> set[tuple[str, str]]:
    """Every documented (path, METHOD)."""
    return {
        (path, method.upper())
        for path, item in doc["paths"].items()
        for method in METHODS
        if method in item
    }


def resolve(doc: Document, node: Mapping[str, Any]) -> Mapping[str, Any]:
    """`node`, or what its local `$ref` points at (followed until it is not a `$ref`)."""
    while "$ref" in node:
        target: Any = doc
        for part in str(node["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def responses(doc: Document, path: str, method: str) -> dict[str, Mapping[str, Any]]:
    """The operation's responses by status code, `$ref`s resolved."""
    operation = doc["paths"][path][method.lower()]
    return {status: resolve(doc, r) for status, r in operation["responses"].items()}


def documented_answers(doc: Document) -> set[tuple[str, str, int, str]]:
    """Every (path, METHOD, status, media type) the document says an answer can be."""
    return {
        (path, method, int(status), media_type)
        for path, method in operations(doc)
        for status, response in responses(doc, path, method).items()
        for media_type in response.get("content", {})
    }


def media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


def check_answer(
    doc: Document,
    path: str,
    method: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
) -> None:
    """Raise AssertionError unless the document lists this answer for the operation:
    its status, its media type, its required headers, and a body its schema accepts."""
    where = f"{method} {path} -> {status}"
    documented = responses(doc, path, method)
    assert str(status) in documented, f"{where}: status not documented ({sorted(documented)})"
    response = documented[str(status)]
    lower = {name.lower(): value for name, value in headers.items()}
    kind = media_type(lower.get("content-type", ""))
    content = response.get("content", {})
    assert kind in content, f"{where}: content type {kind!r} not documented ({sorted(content)})"
    for name, header in response.get("headers", {}).items():
        header = resolve(doc, header)
        value = lower.get(name.lower())
        if value is None:
            assert not header.get("required", False), f"{where}: header {name} missing"
            continue
        _validate(doc, header["schema"], value, f"{where}: header {name}")
    instance: Any = orjson.loads(body) if kind == "application/json" else body.decode()
    _validate(doc, content[kind]["schema"], instance, f"{where}: body")


def _validate(doc: Document, schema: Mapping[str, Any], instance: Any, where: str) -> None:
    # The document's components ride along in the root, so `#/components/...` resolves.
    root = {"allOf": [schema], "components": doc["components"]}
    errors = [e.message for e in OAS31Validator(root).iter_errors(instance)]
    assert not errors, f"{where} does not match the document: {errors} in {instance!r:.300}"
