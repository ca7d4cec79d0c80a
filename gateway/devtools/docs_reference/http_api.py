"""The HTTP API page (`docs/reference/http-api.md`), generated from the OpenAPI document
the gateway serves (`gateway.ingest.app.openapi_document`).

One section per operation, anchored by its `operationId` (`#receiveWebhook`): summary,
description, authentication, parameters, request body and every documented answer with
its status, description, headers and media types; then the document's schemas
(`#schema-Recorded`). The OpenAPI document stays the contract; this is how it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.devtools.docs_reference.text import code, generated_header, table
from gateway.ingest.app import openapi_document

Node = Mapping[str, Any]

#: The HTTP methods a path item can hold, in the order a reader expects them.
_METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "trace")


def render() -> str:
    """The whole page."""
    doc: Node = orjson.loads(openapi_document())
    info = doc["info"]
    parts = [
        generated_header("the OpenAPI document (gateway/ingest/openapi.json)"),
        "# HTTP API\n\n",
        f"{info.get('summary', '')}\n\n" if info.get("summary") else "",
        f"{info['description']}\n\n" if info.get("description") else "",
        f"OpenAPI {doc['openapi']}, API version {info['version']}; `gateway serve` serves the "
        "document itself at `/openapi.json`.\n\n",
        table(
            ["operation", "summary"],
            (
                [f"[{code(f'{method.upper()} {path}')}](#{op['operationId']})", op["summary"]]
                for path, method, op in _operations(doc)
            ),
        ),
        "\n",
    ]
    parts += [_operation(doc, path, method, op) for path, method, op in _operations(doc)]
    parts.append("## Schemas {#schemas}\n\n")
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        parts.append(_schema_section(doc, name, schema))
    return "".join(parts).rstrip("\n") + "\n"


def _operations(doc: Node) -> list[tuple[str, str, Node]]:
    return [
        (path, method, item[method])
        for path, item in doc["paths"].items()
        for method in _METHODS
        if method in item
    ]


def _resolve(doc: Node, node: Node) -> Node:
    """`node`, or what its `$ref` (`#/components/...`) points at."""
    while "$ref" in node:
        target: Any = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _operation(doc: Node, path: str, method: str, op: Node) -> str:
    out = [f"## {code(f'{method.upper()} {path}')} {{#{op['operationId']}}}\n\n"]
    out.append(f"**{op['summary']}**\n\n")
    if op.get("description"):
        out.append(f"{op['description']}\n\n")
    if op.get("security"):
        schemes = doc.get("components", {}).get("securitySchemes", {})
        for requirement in op["security"]:
            for name in requirement:
                scheme = schemes.get(name, {})
                kind = " ".join(str(scheme.get(k, "")) for k in ("scheme", "type")).strip()
                detail = f": {scheme['description']}" if scheme.get("description") else ""
                out.append(f"Authentication: {kind} ({code(name)}){detail}\n\n")
    params = [_resolve(doc, p) for p in op.get("parameters", [])]
    if params:
        rows = [
            [
                code(p["name"]),
                p["in"],
                "yes" if p.get("required") else "no",
                _schema_brief(doc, p.get("schema", {})),
                p.get("description", ""),
            ]
            for p in params
        ]
        out.append("**Parameters**\n\n")
        out.append(table(["name", "in", "required", "schema", "description"], rows) + "\n")
    if "requestBody" in op:
        body = _resolve(doc, op["requestBody"])
        required = "required" if body.get("required") else "optional"
        out.append(f"**Request body** ({required})\n\n")
        if body.get("description"):
            out.append(f"{body['description']}\n\n")
        rows = [
            [code(media), _schema_brief(doc, content.get("schema", {}))]
            for media, content in body.get("content", {}).items()
        ]
        out.append(table(["media type", "schema"], rows) + "\n")
    out.append("**Responses**\n\n")
    rows = []
    for status, answer in sorted(op["responses"].items(), key=lambda kv: _status_order(kv[0])):
        answer = _resolve(doc, answer)
        media = ", ".join(
            f"{code(m)} {_schema_brief(doc, c.get('schema', {}))}".rstrip()
            for m, c in answer.get("content", {}).items()
        )
        headers = ", ".join(
            f"{code(h)}: {_resolve(doc, spec).get('description', '')}".rstrip(": ")
            for h, spec in answer.get("headers", {}).items()
        )
        rows.append([code(status), answer.get("description", ""), media, headers])
    out.append(table(["status", "description", "content", "headers"], rows) + "\n")
    return "".join(out)


def _status_order(status: str) -> tuple[int, str]:
    return (int(status), "") if status.isdigit() else (1000, status)


def _schema_brief(doc: Node, schema: Node) -> str:
    """A schema in a few words: a link to a named one, else its type and bounds."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name})"
    words = []
    if "enum" in schema:
        words.append("one of " + ", ".join(code(orjson.dumps(v).decode()) for v in schema["enum"]))
    if "const" in schema:
        words.append(f"exactly {code(orjson.dumps(schema['const']).decode())}")
    if "type" in schema:
        kind = schema["type"]
        words.append(" or ".join(kind) if isinstance(kind, list) else str(kind))
    for key, label in (("minLength", "min length"), ("maxLength", "max length")):
        if key in schema:
            words.append(f"{label} {schema[key]}")
    for key, label in (("minimum", "≥"), ("maximum", "≤")):
        if key in schema:
            words.append(f"{label} {schema[key]}")
    if "pattern" in schema:
        words.append("matching a pattern")
    if "not" in schema:
        words.append(f"not {_schema_brief(doc, schema['not'])}")
    for combinator in ("oneOf", "anyOf", "allOf"):
        if combinator in schema:
            joined = "; ".join(_schema_brief(doc, s) for s in schema[combinator])
            words.append(f"{combinator} ({joined})")
    return ", ".join(words)


def _schema_section(doc: Node, name: str, schema: Node) -> str:
    out = [f"### {name} {{#schema-{name}}}\n\n"]
    if schema.get("description"):
        out.append(f"{schema['description']}\n\n")
    properties: Node = schema.get("properties", {})
    if properties and "allOf" in schema:
        bases = ", ".join(_schema_brief(doc, s) for s in schema["allOf"])
        out.append(f"Every member of {bases}, with:\n\n")
    if properties:
        required = set(schema.get("required", ()))
        rows = [
            [
                code(prop),
                "yes" if prop in required else "no",
                _schema_brief(doc, spec),
                spec.get("description", ""),
            ]
            for prop, spec in properties.items()
        ]
        out.append(table(["property", "required", "schema", "description"], rows) + "\n")
    else:
        out.append(f"{_schema_brief(doc, schema) or 'any value'}\n\n")
    return "".join(out)
