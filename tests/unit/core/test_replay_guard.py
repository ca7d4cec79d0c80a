"""What a captured signature can be made to do, decided by pure code: which schemes vouch
for the event id (and which need the body digest guard), which headers are stored and how
much of them, and which event types a provider's allow-list admits."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway import settings
from gateway.cli.format import REDACTED, shown_headers
from gateway.core.bodies.content import (
    MAX_HEADER_VALUE_CHARS,
    MAX_HEADERS_CHARS,
    NEVER_STORED,
    HeaderPolicy,
    header_policy,
    storable_headers,
)
from gateway.core.events.model import Event, Outcome, webhook_event
from gateway.core.providers import PROVIDERS, get_scheme
from gateway.core.signatures import FieldRef, SchemeParams
from gateway.core.type_patterns import type_allowed, type_patterns
from gateway.errors import ConfigError
from gateway.ingest.remembered_keys import RecordedKeys, RememberingInbox
from gateway.metrics import Counter

BODY = b'{"id": "evt_1", "event_id": "evt_1", "type": "a.b", "event_type": "a.b"}'
HEADERS = {"x-ts": "1700000000", "x-id": "d1", "x-type": "push"}


def hmac_params(id_from: str, *, timestamp_header: str = "") -> SchemeParams:
    return SchemeParams(
        secrets=("s",),
        header="x-sig",
        timestamp_header=timestamp_header,
        event_id_from=FieldRef.parse(id_from),
        event_type_from=FieldRef.parse("header:X-Type"),
    )


# (scheme, params, does the signature vouch for the id, the digest expected when not)
ID_CASES = [
    pytest.param("stripe", SchemeParams(("s",)), True, None, id="stripe-id-in-signed-body"),
    pytest.param("paddle", SchemeParams(("s",)), True, None, id="paddle-id-in-signed-body"),
    pytest.param("standard", SchemeParams(("s",)), True, None, id="standard-id-is-signed"),
    pytest.param("github", SchemeParams(("s",)), False, hashlib.sha256(BODY).digest(),
                 id="github-body-only"),
    pytest.param("shopify", SchemeParams(("s",)), False, hashlib.sha256(BODY).digest(),
                 id="shopify-body-only"),
    pytest.param("hmac", hmac_params("json:event_id"), True, None, id="hmac-json-id"),
    pytest.param("hmac", hmac_params("json:event_id", timestamp_header="x-ts"), True, None,
                 id="hmac-json-id-timestamped"),
    pytest.param("hmac", hmac_params("header:X-Id"), False, hashlib.sha256(BODY).digest(),
                 id="hmac-header-id-body-only"),
    # The window bounds a replay but does not stop one within it; the digest covers
    # the signed timestamp, so equal bodies sent at different seconds stay apart.
    pytest.param("hmac", hmac_params("header:X-Id", timestamp_header="x-ts"), False,
                 hashlib.sha256(b"1700000000." + BODY).digest(), id="hmac-header-id-timestamped"),
]  # fmt: skip


@pytest.mark.parametrize(("scheme", "params", "authenticated", "digest"), ID_CASES)
def test_which_schemes_vouch_for_the_event_id(
    scheme: str, params: SchemeParams, authenticated: bool, digest: bytes | None
) -> None:
    """A digest is computed exactly when the signature leaves the id unsigned."""
    s = get_scheme(scheme)
    assert s.authenticates_id(params) is authenticated
    assert s.replay_digest(params, HEADERS, BODY) == digest


def test_the_digest_ignores_every_unsigned_header() -> None:
    """Forged ids, types and junk headers leave the digest of a body-only scheme as it was."""
    github = get_scheme("github")
    params = SchemeParams(("s",))
    forged = {"x-github-delivery": "forged", "x-github-event": "anything", "x-junk": "j" * 99}
    assert github.replay_digest(params, forged, BODY) == github.replay_digest(params, {}, BODY)
    assert github.replay_digest(params, {}, BODY + b" ") != github.replay_digest(params, {}, BODY)


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_no_scheme_stores_its_own_signature(name: str) -> None:
    """A scheme's stored headers and its signature headers never overlap."""
    params = hmac_params("header:X-Id", timestamp_header="x-ts") if name == "hmac" else None
    scheme = get_scheme(name)
    params = params or SchemeParams(("s",))
    assert not set(scheme.stored_headers(params)) & set(scheme.signature_headers(params))
    assert all(h == h.lower() for h in scheme.stored_headers(params))


POLICY = header_policy(["x-id", "content-type", "user-agent"])

# (intent, policy, headers sent, headers stored)
HEADER_CASES = [
    pytest.param(POLICY, {"x-id": "1", "x-other": "2", "content-type": "a/b"},
                 {"x-id": "1", "content-type": "a/b"}, id="only-allowed-names"),
    pytest.param(header_policy(["authorization", "cookie", "stripe-signature", "x-a"]),
                 {"authorization": "Bearer t", "cookie": "c", "stripe-signature": "v1=x",
                  "x-a": "1"}, {"x-a": "1"}, id="never-stored-even-if-listed"),
    pytest.param(header_policy(["x-sig", "x-a"], never=["X-Sig"]), {"x-sig": "s", "x-a": "1"},
                 {"x-a": "1"}, id="the-senders-own-signature-header"),
    pytest.param(POLICY, {"x-id": "v" * 5000}, {"x-id": "v" * MAX_HEADER_VALUE_CHARS},
                 id="value-cut-to-1-KiB"),
    pytest.param(HeaderPolicy(("a", "b", "c"), max_value_chars=10, max_total_chars=15),
                 {"c": "3" * 9, "b": "2" * 9, "a": "1" * 9}, {"a": "1" * 9, "b": "2" * 4},
                 id="total-cap-cuts-in-policy-order-whatever-the-request-order"),
    pytest.param(POLICY, {}, {}, id="nothing-sent"),
]  # fmt: skip


@pytest.mark.parametrize(("policy", "sent", "stored"), HEADER_CASES)
def test_stored_headers(policy: HeaderPolicy, sent: dict[str, str], stored: dict[str, str]) -> None:
    """Only allowed headers, never credentials or signatures, each value and the total capped."""
    assert storable_headers(sent, policy) == (stored, False)


def test_a_flood_of_headers_stores_a_bounded_row() -> None:
    """Every allowed header at 4 MiB still stores at most the total cap."""
    policy = header_policy([f"x-h{i}" for i in range(40)])
    sent = {f"x-h{i}": "j" * (4 << 20) for i in range(40)}
    kept, _ = storable_headers(sent, policy)
    assert sum(len(k) + len(v) for k, v in kept.items()) <= MAX_HEADERS_CHARS
    assert kept == storable_headers(dict(reversed(sent.items())), policy)[0]  # deterministic


def provider(table: dict[str, Any]) -> settings.ProviderSettings:
    doc = {"database": {"url": "postgresql://h/db"}, "nats": {"url": "nats://h:4222"}}
    return settings.parse(doc | {"providers": {"p": table}}, {}).providers["p"]


GITHUB = {"scheme": "github", "secrets": ["s"]}
HMAC = {
    "scheme": "hmac",
    "secrets": ["s"],
    "header": "X-Acme-Signature",
    "timestamp_header": "X-Acme-Ts",
    "event_id_from": "header:X-Acme-Id",
    "event_type_from": "header:X-Acme-Event",
}

# (provider table, the headers it stores, in priority order)
POLICY_CASES = [
    pytest.param({"scheme": "stripe", "secrets": ["s"]}, ("content-type", "user-agent"),
                 id="stripe"),
    pytest.param(GITHUB, ("x-github-delivery", "x-github-event", "x-github-hook-id",
                          "x-github-hook-installation-target-id",
                          "x-github-hook-installation-target-type", "content-type",
                          "user-agent"), id="github"),
    pytest.param(HMAC | {"store_headers": ["X-Request-Id"]},
                 ("x-acme-id", "x-acme-event", "x-acme-ts", "content-type", "user-agent",
                  "x-request-id"), id="hmac-referenced-headers-and-extras"),
]  # fmt: skip


@pytest.mark.parametrize(("table", "names"), POLICY_CASES)
def test_each_provider_stores_its_own_headers(table: dict[str, Any], names: tuple[str]) -> None:
    """The scheme's id/type/timestamp headers, the common ones, then `store_headers`."""
    assert provider(table).headers.names == names


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (GITHUB | {"store_headers": ["Authorization"]}, "store_headers"),
        (GITHUB | {"store_headers": ["X-Hub-Signature-256"]}, "store_headers"),
        (HMAC | {"store_headers": ["x-acme-signature"]}, "store_headers"),
        (GITHUB | {"store_headers": ["bad name"]}, "store_headers"),
        (GITHUB | {"store_headers": "x-a"}, "store_headers"),
        (GITHUB | {"event_types": []}, "event_types"),
        (GITHUB | {"event_types": ["a.*.b"]}, "event_types"),
        (GITHUB | {"event_types": [""]}, "event_types"),
        (GITHUB | {"event_types": ["push", 3]}, "event_types"),
        (GITHUB | {"event_types": [" push"]}, "event_types"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else "",
)
def test_bad_header_or_type_lists_stop_start_up(table: dict[str, Any], key: str) -> None:
    """A credential or signature header to store, or a pattern that means nothing, is a
    config error naming the key, not silently ignored."""
    with pytest.raises(ConfigError) as info:
        provider(table)
    assert info.value.key == f"providers.p.{key}"


def test_never_stored_covers_every_fixed_signature_header() -> None:
    for name, scheme in {n: p.scheme for n, p in PROVIDERS.items()}.items():
        if name != "hmac":
            assert set(scheme.signature_headers(SchemeParams(("s",)))) <= NEVER_STORED


PATTERNS = ("payment_intent.*", "charge.refunded", "orders/*")

# (event type, admitted by PATTERNS)
TYPE_CASES = [
    ("charge.refunded", True),
    ("charge.refunded.extra", False),  # exact means exact
    ("charge.succeeded", False),
    ("payment_intent.succeeded", True),
    ("payment_intent.", True),
    ("payment_intent", False),  # the prefix includes the dot
    ("Payment_intent.succeeded", False),  # case-sensitive, as providers' types are
    ("orders/create", True),
    ("orders.create", False),  # matched as written, not as subject tokens
]


@pytest.mark.parametrize(("event_type", "allowed"), TYPE_CASES)
def test_event_type_patterns(event_type: str, allowed: bool) -> None:
    assert type_allowed(event_type, type_patterns(PATTERNS)) is allowed


@pytest.mark.parametrize(
    ("event_type", "patterns", "error_class"),
    [
        ("charge.refunded", ("charge.*",), None),
        ("charge.refunded", ("payment_intent.*",), "EVENT_TYPE_NOT_ALLOWED"),
        ("charge.refunded", None, None),  # no list: every type
        ("a\x00b", ("payment_intent.*",), "EVENT_TYPE_INVALID"),  # the precise class first
    ],
)
def test_a_type_outside_the_list_is_parked_not_refused(
    event_type: str, patterns: tuple[str, ...] | None, error_class: str | None
) -> None:
    """The event is still shaped (so recorded); only its failure says why it goes no further."""
    event = webhook_event(
        "p",
        FieldRef("header", "x-id"),
        FieldRef("header", "x-type"),
        {"x-id": "d1", "x-type": event_type},
        b"{}",
        datetime.now(UTC),
        event_types=patterns,
    )
    assert (event.failure.error_class if event.failure else None) == error_class
    assert (event.subject is None) is (error_class is not None)


def test_dlq_show_redacts_secret_headers_of_old_rows() -> None:
    """Rows stored before the allow-list may hold any header; show never prints these."""
    shown = shown_headers(
        {
            "x-hub-signature-256": "sha256=ab",
            "x-acme-signature": "cd",
            "authorization": "Bearer t",
            "cookie": "c",
            "x-shopify-hmac-sha256": "ef",
            "x-github-event": "push",
        }
    )
    assert shown == dict.fromkeys(shown, REDACTED) | {"x-github-event": "push"}


class Gate:
    """An inbox that answers like PostgreSQL with both unique indexes."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.digests: set[bytes] = set()
        self.asked = 0

    async def accept(self, event: Event) -> Outcome:
        self.asked += 1
        if event.event_id in self.ids or event.body_sha256 in self.digests:
            return Outcome.DUPLICATE
        self.ids.add(event.event_id)
        if event.body_sha256 is not None:
            self.digests.add(event.body_sha256)
        return Outcome.ACCEPTED

    async def close(self) -> None:
        pass


def github_event(delivery: str, body: bytes) -> Event:
    return webhook_event(
        "github",
        FieldRef("header", "x-github-delivery"),
        FieldRef("header", "x-github-event"),
        {"x-github-delivery": delivery, "x-github-event": "push"},
        body,
        datetime.now(UTC),
        body_sha256=hashlib.sha256(body).digest(),
    )


async def test_a_forged_id_is_never_remembered() -> None:
    """A replay under a forged id is a duplicate, but no row holds that id: remembering it
    would answer a later genuine event with that id `duplicate` and lose it."""
    gate = Gate()
    inbox = RememberingInbox(gate, RecordedKeys(100), Counter("c", "c"))
    assert await inbox.accept(github_event("d1", b'{"a": 1}')) is Outcome.ACCEPTED
    assert await inbox.accept(github_event("forged", b'{"a": 1}')) is Outcome.DUPLICATE
    assert gate.asked == 1  # the digest is remembered from the accepted one
    assert await inbox.accept(github_event("forged", b'{"a": 2}')) is Outcome.ACCEPTED
    assert await inbox.accept(github_event("d1", b'{"a": 3}')) is Outcome.DUPLICATE
