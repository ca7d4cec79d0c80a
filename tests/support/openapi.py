"""The checked-in OpenAPI document, read the way the contract tests need it: which
operations it lists, and whether one answer is one it documents."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import orjson
from openapi_schema_validator import OAS31Validator

from gateway.ingest.app import openapi_document

#: The HTTP methods an OpenAPI path item can hold, in the document's spelling.
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: Where the document keeps the pattern of text without control characters.
PRINTABLE_SCHEMA = "PrintableText"

Document = dict[str, Any]


def load() -> Document:
    doc: Document = orjson.loads(openapi_document())
    return doc


def nonprintable_ranges() -> list[tuple[int, int]]:
    """The code points the gateway calls control characters (`str.isprintable` is False:
    control, format, surrogate, private-use and unassigned code points, and separators
    but the space), as ranges."""
    found: list[tuple[int, int]] = []
    start = None
    for cp in range(0x110000):
        bad = not chr(cp).isprintable()
        if bad and start is None:
            start = cp
        elif not bad and start is not None:
            found.append((start, cp - 1))
            start = None
    if start is not None:
        found.append((start, 0x10FFFF))
    return found


def printable_ranges() -> list[tuple[int, int]]:
    """The code points between `nonprintable_ranges`: what text without control
    characters is made of."""
    found: list[tuple[int, int]] = []
    after = 0
    for first, last in nonprintable_ranges():
        if after < first:
            found.append((after, first - 1))
        after = last + 1
    if after <= 0x10FFFF:
        found.append((after, 0x10FFFF))
    return found


def printable_pattern() -> str:
    """The document's pattern of text without control characters, made from
    `printable_ranges`: `\\uXXXX` escapes in the BMP (ECMA-262, Python and Rust all read
    them), the character itself beyond it (no escape is common to all three).

    The class lists what is allowed rather than what is refused: generators such as
    Hypothesis (schemathesis) build a class one code point at a time, and the printable
    ones are about 145,000 of 1.1 million.
    """

    def one(cp: int) -> str:
        return f"\\u{cp:04x}" if cp < 0x10000 else chr(cp)

    text = "".join(one(a) if a == b else f"{one(a)}-{one(b)}" for a, b in printable_ranges())
    return f"^[{text}]*$"


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


def write_printable_pattern(path: str) -> None:
    """Rewrite the document at `path` with `printable_pattern()` (after a Python upgrade
    changed what `str.isprintable` says), keeping its layout."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    doc["components"]["schemas"][PRINTABLE_SCHEMA]["pattern"] = printable_pattern()
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    # Characters beyond the BMP as JSON escapes, so the file shows no invisible ones.
    text = "".join(json.dumps(c)[1:-1] if ord(c) > 0xFFFF else c for c in text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    write_printable_pattern(sys.argv[1] if len(sys.argv) > 1 else "gateway/ingest/openapi.json")
