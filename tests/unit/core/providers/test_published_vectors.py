"""The providers' own signed deliveries, published with their secret and signature,
verified by our schemes at the time they were signed: Paddle's (`paddle-python-sdk`'s
Verifier tests), Standard Webhooks' reference libraries' and GitHub's documented example.
They come with the corpus (`vectors.json`, each with its repository, commit and path);
skipped without it, as the corpus tests are."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.core.providers import get_scheme
from gateway.core.signatures import SchemeParams
from gateway.errors import SignatureMismatch
from tests.support.corpus import CORPUS

VECTORS = CORPUS.parent / "vectors.json"
SCHEMES = {"paddle_vectors": "paddle", "standard_vectors": "standard", "github_vectors": "github"}


def published() -> list[Any]:
    if not VECTORS.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {VECTORS}"))]
    items = json.loads(VECTORS.read_text(encoding="utf-8"))
    return [pytest.param(item, id=item["name"]) for item in items]


def signed_at(headers: dict[str, str]) -> float:
    """The time the vector was signed, so the window holds as it did then."""
    for name in ("webhook-timestamp",):
        if name in headers:
            return float(headers[name])
    paddle = headers.get("paddle-signature", "")
    if paddle.startswith("ts="):
        return float(paddle.split(";")[0][3:])
    return 0.0


@pytest.mark.parametrize("item", published())
def test_each_published_vector_verifies_and_a_changed_byte_does_not(item: Any) -> None:
    scheme = get_scheme(SCHEMES[item["provider"]])
    headers = {k.lower(): v for k, v in item["headers"].items()}
    params = SchemeParams(secrets=(item["secret"],))
    body = item["body"].encode()
    scheme.verify(params, headers, body, signed_at(headers))
    with pytest.raises(SignatureMismatch):
        scheme.verify(params, headers, body + b" ", signed_at(headers))
