"""The corpus of real provider deliveries (1,076, taken byte for byte from public
repositories; sources and licences in its `MANIFEST.json`): reading it, signing each item
as its provider would, and a gateway config that takes every one of them. Point
`GATEWAY_TEST_CORPUS` at it; the tests that need it are skipped without it."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from typing import Any

import orjson

from tests.support import vectors
from tests.support.gateway import SECRETS, config

CORPUS = Path(os.environ.get("GATEWAY_TEST_CORPUS", "/work/shared/corpus")) / "items.jsonl.gz"
SECRET = "corpus-test-secret"
#: The senders without a scheme of their own, as an operator would configure them.
GENERIC = {
    "woocommerce": {
        "header": "X-WC-Webhook-Signature",
        "encoding": "base64",
        "event_id_from": "header:X-WC-Webhook-Delivery-ID",
        "event_type_from": "header:X-WC-Webhook-Topic",
    },
    "bitbucket": {
        "header": "X-Hub-Signature",
        "prefix": "sha256=",
        "event_id_from": "header:X-Request-UUID",
        "event_type_from": "header:X-Event-Key",
    },
}
#: Where each provider's event id is: ("json" | "header", name).
ID_FROM = {
    "stripe": ("json", "id"),
    "paddle": ("json", "event_id"),
    "github": ("header", "x-github-delivery"),
    "shopify": ("header", "x-shopify-webhook-id"),
    "standard": ("header", "webhook-id"),
    "woocommerce": ("header", "x-wc-webhook-delivery-id"),
    "bitbucket": ("header", "x-request-uuid"),
    "checkout": ("json", "id"),
}
#: Signed over the body alone with the id outside the signature: a second delivery of
#: the same bytes under another id is a replay, answered `duplicate`.
BODY_ONLY = {"github", "shopify", "woocommerce", "bitbucket"}


def signed(provider: str, index: int, item: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    """The item's own headers plus the signature its provider would send."""
    body: bytes = item["body"].encode()
    headers = {k.lower(): v for k, v in item["headers"].items()}
    ts = int(time.time())
    if provider == "stripe":
        headers["stripe-signature"] = f"t={ts},v1={vectors.stripe_v1(SECRETS[provider], ts, body)}"
    elif provider == "paddle":
        headers["paddle-signature"] = f"ts={ts};h1={vectors.paddle_h1(SECRETS[provider], ts, body)}"
    elif provider == "github":
        headers["x-hub-signature-256"] = "sha256=" + vectors.github_sha256(SECRETS[provider], body)
    elif provider == "shopify":
        headers["x-shopify-hmac-sha256"] = vectors.shopify_b64(SECRETS[provider], body)
    elif provider == "standard":  # the corpus has the senders' bodies, not their ids
        msg_id = f"msg_corpus_{index}"
        sig = vectors.standard_v1(SECRETS[provider], msg_id, ts, body)
        headers |= {"webhook-id": msg_id, "webhook-timestamp": str(ts)}
        headers["webhook-signature"] = f"v1,{sig}"
    elif provider == "woocommerce":  # base64 HMAC-SHA256 of the body, like Shopify's
        headers["x-wc-webhook-signature"] = vectors.shopify_b64(SECRET, body)
    elif provider == "bitbucket":
        headers["x-hub-signature"] = "sha256=" + vectors.github_sha256(SECRET, body)
    else:  # Checkout.com: hex HMAC-SHA256 of the body
        headers["cko-signature"] = vectors.generic_hex(SECRET, body)
    return headers, body


def provider_id(provider: str, headers: dict[str, str], body: bytes) -> str:
    where, name = ID_FROM[provider]
    value = headers[name] if where == "header" else orjson.loads(body)[name]
    return str(value)


def corpus_items() -> list[dict[str, Any]]:
    """Every delivery of the corpus, in its order."""
    with gzip.open(CORPUS) as lines:
        items = [orjson.loads(line) for line in lines]
    assert len(items) == 1076
    return items


def corpus_config(database_url: str, nats_url: str) -> dict[str, Any]:
    """A gateway config with every scheme and the generic senders, large bodies allowed."""
    doc = config(database_url, nats_url, http={"max_body_bytes": 1_000_000})
    for name, params in GENERIC.items():
        doc["providers"][name] = {"scheme": "hmac", "secrets": [SECRET], **params}
    doc["providers"]["checkout"] = {"scheme": "checkout", "secrets": [SECRET]}
    return doc
