"""The admin API's OpenAPI document: the fragments merge into one 3.1 document, a path
or component defined twice differently is refused, and every $ref resolves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.console.api_doc import FragmentClash, document, merge, read_fragments


def op(summary: str) -> dict[str, Any]:
    return {"summary": summary, "responses": {"200": {"description": "ok"}}}


def test_fragments_merge_paths_and_components() -> None:
    doc = merge(
        {
            "b.json": {
                "paths": {"/x": {"get": op("x")}},
                "components": {"schemas": {"S": {"type": "string"}}},
            },
            "a.json": {
                "paths": {"/x": {"post": op("make x")}, "/y": {"get": op("y")}},
                "components": {
                    "schemas": {"S": {"type": "string"}},
                    "responses": {"R": {"description": "r"}},
                },
            },
        }
    )
    assert doc["openapi"] == "3.1.0"
    assert set(doc["paths"]) == {"/x", "/y"}
    assert set(doc["paths"]["/x"]) == {"get", "post"}
    assert doc["components"]["schemas"] == {"S": {"type": "string"}}
    assert doc["components"]["responses"] == {"R": {"description": "r"}}
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


@pytest.mark.parametrize(
    "second",
    [
        {"paths": {"/x": {"get": op("another x")}}},
        {"components": {"schemas": {"S": {"type": "integer"}}}},
    ],
)
def test_a_clash_is_refused(second: dict[str, Any]) -> None:
    first = {
        "paths": {"/x": {"get": op("x")}},
        "components": {"schemas": {"S": {"type": "string"}}},
    }
    with pytest.raises(FragmentClash):
        merge({"a.json": first, "b.json": second})


def refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def test_the_shipped_document_resolves_every_ref() -> None:
    doc = document()
    assert "/console/api/v1/tokens" in doc["paths"]
    assert "_common.json" in read_fragments()
    unresolved = []
    for ref in refs(doc):
        assert ref.startswith("#/"), ref
        node: Any = doc
        for part in ref[2:].split("/"):
            if not isinstance(node, dict) or part not in node:
                unresolved.append(ref)
                break
            node = node[part]
    assert sorted(set(unresolved)) == []
    json.dumps(doc)  # serialisable as served


def test_every_operation_lives_under_the_api_prefix() -> None:
    assert [p for p in document()["paths"] if not p.startswith("/console/api/v1/")] == []
