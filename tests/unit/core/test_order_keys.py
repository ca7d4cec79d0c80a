"""Ordering keys: the entry language, the pointer, the bound on a key, and what the
default rules give for every real payload of the corpus."""

from __future__ import annotations

import collections
import gzip
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.core.bodies.pointers import parse_pointer
from gateway.core.ordering.keys import (
    KeyRule,
    bounded_key,
    order_key_of,
    parse_rule,
    parse_rules,
)
from gateway.core.providers import PROVIDERS

CORPUS = Path(os.environ.get("GATEWAY_TEST_CORPUS", "/work/shared/corpus")) / "items.jsonl.gz"


def default_rules(scheme: str) -> tuple[KeyRule, ...]:
    """The scheme's own rules, as its provider module declares them."""
    return PROVIDERS[scheme].order_keys


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(("entry", "glob", "tokens"), [
    ("/id", None, ("id",)),  # a pointer alone applies to every type
    ("/data/object/payment_intent", None, ("data", "object", "payment_intent")),
    ("refunds/* /order_id", "refunds/*", ("order_id",)),  # glob, one blank, pointer
    ("charge.refunded /data/object/id", "charge.refunded", ("data", "object", "id")),
    ("/a~1b/c~0d", None, ("a/b", "c~d")),  # RFC 6901 escapes, `~1` before `~0`
    ("/a~01", None, ("a~1",)),  # `~01` is `~` then `1`, never `/`
    ("/items/0/id", None, ("items", "0", "id")),
    ("/", None, ("",)),  # the member named "" is a valid pointer
    ("/a b", None, ("a b",)),  # a blank inside a pointer is part of a member name
])  # fmt: skip
def test_an_entry_is_a_pointer_or_a_glob_and_a_pointer(
    entry: str, glob: str | None, tokens: tuple[str, ...]
) -> None:
    rule = parse_rule(entry)
    assert (rule.type_glob, rule.tokens) == (glob, tokens)
    assert rule.text == entry


@pytest.mark.parametrize(("entry", "why"), [
    ("", "non-empty"),
    ("   ", "non-empty"),
    ("id", "neither"),  # a member name is not a pointer
    ("data.object.id", "neither"),
    ("refunds/*", "neither"),  # a glob without its pointer
    (" /id", "whitespace"),
    ("/id ", "whitespace"),
    ("refunds/*  /order_id", "whitespace"),  # two blanks: the glob would end in one
    ("in*voice /id", "only end"),  # the type-pattern rules apply to the glob
    ("/a~2", "'~'"),
    ("/a~", "'~'"),
    ("/" + "a" * 1000, "at most"),
])  # fmt: skip
def test_a_bad_entry_is_refused_saying_why(entry: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_rule(entry)


def test_a_list_names_its_first_bad_entry_and_an_empty_list_orders_nothing() -> None:
    with pytest.raises(ValueError, match="entry 2"):
        parse_rules(["/id", "id"])
    assert parse_rules([]) == ()


def test_a_pointer_must_start_with_a_slash() -> None:
    with pytest.raises(ValueError, match="JSON pointer"):
        parse_pointer("")


DOC = {
    "type": "charge.refunded",
    "data": {"object": {"id": "ch_1", "payment_intent": "pi_1", "amount": 5}},
    "items": [{"id": 7}, {"id": "x"}],
    "expanded": {"payment_intent": {"id": "pi_2"}},
    "flags": {"t": True, "f": 1.5, "n": None, "empty": "", "zero": 0, "neg": -3},
    "a/b": "slash",
}


@pytest.mark.parametrize(("entries", "event_type", "key"), [
    (["/data/object/payment_intent", "/data/object/id"], "charge.refunded", "pi_1"),
    (["/expanded/payment_intent", "/data/object/id"], "t", "ch_1"),  # an object falls through
    (["/flags/t", "/data/object/id"], "t", "ch_1"),  # a bool is not a key
    (["/flags/f", "/data/object/id"], "t", "ch_1"),  # nor a float
    (["/flags/n", "/data/object/id"], "t", "ch_1"),  # nor null
    (["/flags/empty", "/data/object/id"], "t", "ch_1"),  # nor an empty string
    (["/flags/zero"], "t", "0"),  # an integer is, as its decimal text
    (["/flags/neg"], "t", "-3"),
    (["/items/0/id"], "t", "7"),  # an array index
    (["/items/1/id"], "t", "x"),
    (["/items/01/id", "/items/2/id", "/items/-/id", "/items/x"], "t", None),  # no such index
    (["/a~1b"], "t", "slash"),
    (["/data/object/amount/deeper"], "t", None),  # through a scalar: nothing
    (["/missing"], "t", None),
    (["charge.* /data/object/id"], "charge.refunded", "ch_1"),
    (["refunds/* /data/object/id", "/items/0/id"], "charge.refunded", "7"),  # glob refuses
    (["charge.* /data/object/id"], None, None),  # a glob never takes an untyped event
    (["/data/object/id"], None, "ch_1"),  # a bare pointer does
    ([], "t", None),
])  # fmt: skip
def test_the_first_rule_that_reaches_a_string_or_an_integer_wins(
    entries: list[str], event_type: str | None, key: str | None
) -> None:
    assert order_key_of(parse_rules(entries), event_type, DOC) == key


@pytest.mark.parametrize("doc", [None, [], "text", 3, {"data": []}, {"data": "x"}])
def test_a_body_of_any_shape_gives_no_key_rather_than_an_error(doc: Any) -> None:
    assert order_key_of(parse_rules(["/data/id", "/0"]), "t", doc) is None


@pytest.mark.parametrize(("text", "key"), [
    ("pi_1", "pi_1"),
    ("a b", "a b"),  # a blank inside is printable
    ("~!{}", "~!{}"),
    ("x" * 200, "x" * 200),  # at the bound
    ("x" * 201, sha("x" * 201)),  # past it
    (" a", sha(" a")),  # blank ends
    ("a ", sha("a ")),
    ("é", sha("é")),  # not ASCII
    ("a\tb", sha("a\tb")),  # a control character
    ("a\x7fb", sha("a\x7fb")),  # DEL is not printable
    ("a\nb", sha("a\nb")),  # could split a header line
])  # fmt: skip
def test_a_key_is_kept_when_short_printable_ascii_else_its_sha256(text: str, key: str) -> None:
    assert bounded_key(text) == key
    assert len(bounded_key(text).encode()) <= 200


def test_a_long_key_found_in_a_body_is_bounded() -> None:
    doc = {"id": "k" * 300}
    assert order_key_of(parse_rules(["/id"]), "t", doc) == sha("k" * 300)


def test_every_scheme_has_its_defaults_and_the_default_shapes_are_the_documented_ones() -> None:
    assert [r.text for r in default_rules("stripe")] == [
        "/data/object/payment_intent", "/data/object/id"]  # fmt: skip
    assert [r.text for r in default_rules("paddle")] == ["/data/transaction_id", "/data/id"]
    assert [r.text for r in default_rules("shopify")] == [
        "refunds/* /order_id", "order_transactions/* /order_id", "orders/* /id"]  # fmt: skip
    assert [r.text for r in default_rules("razorpay")] == [
        "/payload/payment/entity/id", "/payload/refund/entity/payment_id",
        "/payload/dispute/entity/payment_id"]  # fmt: skip
    assert default_rules("github") == default_rules("standard") == default_rules("hmac") == ()
    assert all(isinstance(r, KeyRule) for r in default_rules("stripe"))


# ---- the corpus: 1,076 real deliveries ----------------------------------------------

#: Where each provider's event type is in the corpus: ("json" | "header", name).
TYPE_FROM = {
    "stripe": ("json", "type"),
    "paddle": ("json", "event_type"),
    "shopify": ("header", "x-shopify-topic"),
    "github": ("header", "x-github-event"),
    "standard": ("json", "type"),
    "woocommerce": ("header", "x-wc-webhook-topic"),
    "bitbucket": ("header", "x-event-key"),
    "checkout": ("json", "type"),
}
#: (keyed, unkeyed) per provider with the default rules; the generic senders use `hmac`.
EXPECTED_COUNTS = {
    "stripe": (164, 12),
    "paddle": (74, 0),
    "shopify": (28, 478),
    "github": (0, 283),
    "standard": (0, 17),
    "woocommerce": (0, 5),
    "bitbucket": (0, 10),
    "checkout": (3, 2),
}


def corpus() -> list[tuple[str, str | None, Any]]:
    """(provider, event type, parsed body) of every corpus delivery."""
    items = []
    with gzip.open(CORPUS, "rt") as lines:
        for line in lines:
            item = orjson.loads(line)
            provider = item["provider"]
            doc = orjson.loads(item["body"])
            headers = {k.lower(): v for k, v in item["headers"].items()}
            where, name = TYPE_FROM[provider]
            event_type = doc.get(name) if where == "json" else headers.get(name)
            items.append((provider, event_type, doc))
    return items


def key_of(provider: str, event_type: str | None, doc: Any) -> str | None:
    scheme = provider if provider in PROVIDERS else "hmac"
    return order_key_of(default_rules(scheme), event_type, doc)


needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason=f"no corpus at {CORPUS}")


@needs_corpus
def test_the_default_rules_key_the_corpus_as_counted() -> None:
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for provider, event_type, doc in corpus():
        counts[provider][key_of(provider, event_type, doc) is None] += 1
    assert {p: tuple(c) for p, c in counts.items()} == EXPECTED_COUNTS


@needs_corpus
def test_every_stripe_payment_event_is_keyed_by_its_payment_intent() -> None:
    seen = 0
    for provider, event_type, doc in corpus():
        if provider != "stripe" or not isinstance(event_type, str):
            continue
        obj = doc["data"]["object"]
        key = key_of(provider, event_type, doc)
        if event_type.startswith("payment_intent."):
            assert key == obj["id"] and str(key).startswith("pi_"), event_type
            seen += 1
        elif isinstance(obj.get("payment_intent"), str):  # a charge, refund, invoice...
            assert key == obj["payment_intent"] and str(key).startswith("pi_"), event_type
            seen += 1
        elif isinstance(obj.get("id"), str):  # no intent (an older charge): its own id
            assert key == obj["id"], event_type
        else:
            assert key is None, event_type
    assert seen == 22  # 10 payment intents, 12 objects naming theirs


@needs_corpus
def test_shopify_refunds_and_transactions_follow_their_order_and_orders_their_id() -> None:
    for provider, topic, doc in corpus():
        if provider != "shopify":
            continue
        key = key_of(provider, topic, doc)
        family = (topic or "").split("/")[0]
        if family in ("refunds", "order_transactions"):
            assert key == str(doc["order_id"]), topic
        elif family == "orders" and type(doc.get("id")) is int:
            assert key == str(doc["id"]), topic
        else:  # `orders/edited` carries `order_edit`, other topics are not orders
            assert key is None, topic


@needs_corpus
def test_paddle_events_follow_their_transaction_else_their_own_id() -> None:
    for provider, event_type, doc in corpus():
        if provider != "paddle":
            continue
        data = doc["data"]
        expected = data.get("transaction_id") or data["id"]
        assert key_of(provider, event_type, doc) == expected, event_type
        if str(event_type).startswith(("transaction.", "adjustment.")):
            assert expected.startswith("txn_")
