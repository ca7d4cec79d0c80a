"""The settlement benchmark's backlog: Stripe payment events, recorded and published the
way the gateway does it, before the worker starts.

Events are shaped by `core.events.model.webhook_event` (what `POST /webhooks/stripe` does after
the signature check), recorded with `adapters.postgres.webhooks.insert_events` in groups (the group
commit's statement), and published with `JetStreamBroker.publish` (the outbox's
pipelined publisher: same subjects, `Nats-Msg-Id` and `Gateway-*` headers), then marked
published. The worker therefore reads exactly what a live gateway would have put on the
stream.

The mix: captures (`payment_intent.succeeded`) from many merchants in six currencies, so
most settle through a conversion, and a small share of partial refunds
(`charge.refunded`). Every refund comes at the end of the backlog and refunds a capture
from its first part, so the capture is settled long before its refund is fetched (the
worker refuses a refund of an unsettled payment, and retries it seconds later).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal

import orjson

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.webhooks import StoredEvent, record_events
from gateway.core.events.model import Event, ordered_subjects, webhook_event
from gateway.core.ledger.ids import clearing_account_id, merchant_account, merchant_account_id
from gateway.core.money import convert_minor
from gateway.core.providers import get_scheme
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, transfer_id
from gateway.currency_stub import DEFAULT_RATES, StubState
from gateway.settings import Settings
from gateway.wiring.settlement import open_ledger

#: Share of captures per currency (the stub quotes each against USD).
CURRENCY_MIX = {"USD": 40, "EUR": 25, "GBP": 15, "JPY": 8, "CAD": 6, "CHF": 6}
MERCHANTS = 50
#: Where the backlog's events keep their ordering key (`[providers.stripe] order_key` of
#: the benchmark's configuration): a group of payments, so a run can spread its events
#: over as many keys as it asks for; a payment's refunds share its capture's key.
ORDER_KEY_POINTER = "/data/object/metadata/order_group"
_GROUP_ROWS = 256  # rows per commit and messages per pipelined publish, as the outbox


@dataclass(frozen=True)
class Payment:
    """One event of the backlog, and what it should move in the ledger currency."""

    kind: str  # "capture" | "refund"
    payment_id: str
    merchant_id: str
    amount_minor: int
    currency: str
    refund_id: str | None = None


def plan_payments(
    events: int, refund_share: float, seed: int = 6, *, run_tag: str = ""
) -> list[Payment]:
    """`events` payments: captures first, then `refund_share` of partial refunds.

    `run_tag` goes into every payment, refund and merchant id, so a ledger that outlives
    the run (a TigerBeetle cluster) gets transfers and accounts of this run only.
    """
    rng = random.Random(seed)
    refunds = int(events * refund_share)
    captures = events - refunds
    if refunds and captures < 2 * refunds:
        raise ValueError("too many refunds: each must refund a capture from the first half")
    currencies = list(CURRENCY_MIX)
    weights = list(CURRENCY_MIX.values())
    out = []
    for i in range(captures):
        currency = rng.choices(currencies, weights)[0]
        amount = rng.randint(100, 50_000) * (100 if currency == "JPY" else 1)
        merchant = f"m_{run_tag}{i % MERCHANTS:04d}"
        out.append(Payment("capture", f"pi_{run_tag}{i:08d}", merchant, amount, currency))
    for j, capture in enumerate(rng.sample(out[: captures // 2], refunds)):
        amount = rng.randint(1, capture.amount_minor)
        out.append(
            Payment(
                "refund",
                capture.payment_id,
                capture.merchant_id,
                amount,
                capture.currency,
                refund_id=f"re_{run_tag}{j:08d}",
            )
        )
    return out


@dataclass(frozen=True)
class ExpectedTransfer:
    """The transfer one payment event should leave in the ledger, computed here."""

    id: int
    debit_account_id: int
    credit_account_id: int
    amount_minor: int  # in the ledger currency


def expected_transfers(
    payments: Sequence[Payment], ledger_currency: str, provider: str = "stripe"
) -> list[ExpectedTransfer]:
    """One transfer per payment, as the worker should build it: the id from the
    settlement (`core.settlement.instructions.transfer_id`), converted with the stub's
    default rates."""
    stub = StubState(rates={tuple(k.split("/")): v for k, v in DEFAULT_RATES.items()})  # type: ignore[misc]
    clearing = clearing_account_id(provider, ledger_currency)
    out = []
    for p in payments:
        rate = stub.lookup(p.currency, ledger_currency)
        if rate is None:
            raise ValueError(f"the stub does not quote {p.currency}/{ledger_currency}")
        moved = convert_minor(p.amount_minor, Decimal(str(rate)), p.currency, ledger_currency)
        capture = p.kind == "capture"
        # A `charge.refunded` is read as the charge's running total, keyed by it; each
        # payment here is refunded once, so the total is the refund.
        instruction = SettlementInstruction(
            settlement_id=p.payment_id,
            kind=SettlementKind.CAPTURE if capture else SettlementKind.REFUND,
            merchant_id=p.merchant_id, amount_minor=p.amount_minor, currency=p.currency,
            refund_id=None if capture else f"refunded:{p.amount_minor}", source_event_id=None,
            cumulative=not capture,
        )  # fmt: skip
        merchant = merchant_account_id(p.merchant_id, ledger_currency)
        debit, credit = (clearing, merchant) if capture else (merchant, clearing)
        out.append(ExpectedTransfer(transfer_id(instruction), debit, credit, moved))
    return out


def expected_merchant_total(payments: Sequence[Payment], ledger_currency: str) -> int:
    """What all merchant accounts together should hold once every event settled once,
    converted with the stub's default rates as the worker converts them."""
    merchants = {merchant_account_id(p.merchant_id, ledger_currency) for p in payments}
    return sum(
        t.amount_minor if t.credit_account_id in merchants else -t.amount_minor
        for t in expected_transfers(payments, ledger_currency)
    )


def order_group(payment_id: str, keys: int) -> str:
    """The ordering key of a payment's events: one of `keys` groups, by payment number."""
    return f"og{int(payment_id.rsplit('_', 1)[-1]) % keys:05d}"


def _body(p: Payment, seq: int, created_s: int, keys: int) -> bytes:
    """A Stripe event body, trimmed but with the fields a real one carries."""
    group = order_group(p.payment_id, keys)
    if p.kind == "capture":
        obj = {
            "id": p.payment_id,
            "object": "payment_intent",
            "amount": p.amount_minor,
            "amount_received": p.amount_minor,
            "currency": p.currency.lower(),
            "status": "succeeded",
            "latest_charge": f"ch_{p.payment_id[3:]}",
            "metadata": {"merchant_id": p.merchant_id, "order_group": group},
        }
        event_type = "payment_intent.succeeded"
    else:
        refund = {"id": p.refund_id, "object": "refund", "amount": p.amount_minor,
                  "created": created_s, "currency": p.currency.lower()}  # fmt: skip
        obj = {
            "id": f"ch_{p.payment_id[3:]}",
            "object": "charge",
            "payment_intent": p.payment_id,
            "amount_refunded": p.amount_minor,
            "currency": p.currency.lower(),
            "refunded": False,
            "refunds": {"object": "list", "data": [refund]},
            "metadata": {"merchant_id": p.merchant_id, "order_group": group},
        }
        event_type = "charge.refunded"
    doc = {
        "id": f"evt_bench{seq:010d}",
        "object": "event",
        "api_version": "2022-08-01",
        "created": created_s,
        "type": event_type,
        "livemode": False,
        "pending_webhooks": 1,
        "data": {"object": obj},
    }
    return orjson.dumps(doc)


def stripe_events(settings: Settings, payments: Sequence[Payment], keys: int) -> Iterator[Event]:
    """The events `POST /webhooks/stripe` would record for these payments: keyed by the
    provider's rules when `[ordering]` is on, as the gateway shapes them."""
    provider = settings.providers["stripe"]
    ordering = settings.ordering.enabled
    ordered = ordered_subjects(settings.settlement.subjects) if ordering else None
    scheme = get_scheme(provider.scheme)
    params = provider.params
    now = datetime.now(UTC)
    headers = {"content-type": "application/json", "user-agent": "Stripe/1.0"}
    for seq, p in enumerate(payments):
        body = _body(p, seq, int(now.timestamp()), keys)
        yield webhook_event(
            "stripe",
            scheme.id_ref(params),
            scheme.type_ref(params),
            headers,
            body,
            now,
            order_rules=provider.order_key if ordering else (),
            ordered=ordered,
        )


def _groups(events: Iterator[Event]) -> Iterator[list[Event]]:
    group: list[Event] = []
    for event in events:
        group.append(event)
        if len(group) == _GROUP_ROWS:
            yield group
            group = []
    if group:
        yield group


async def load_backlog(settings: Settings, payments: Sequence[Payment], keys: int) -> int:
    """Open the merchants' accounts, then record and publish every payment event.

    Returns how many messages JetStream acknowledged (raises if any was not).
    """
    merchants = sorted({p.merchant_id for p in payments})
    async with open_pool(settings.database_url, max_size=2) as pool:
        async with open_ledger(settings, pool) as ledger:
            await ledger.ensure_accounts(
                [merchant_account(m, settings.settlement.currency) for m in merchants]
            )
        broker = JetStreamBroker(settings.nats, name="bench-backlog")
        await broker.start()
        published = 0
        try:
            await broker.jetstream(timeout_s=10)
            for group in _groups(stripe_events(settings, payments, keys)):
                async with pool.acquire() as conn:
                    rows = await record_events(conn, group)
                    # As the outbox reads them back: with the number ingest gave each.
                    stored = [
                        StoredEvent(
                            rows[(e.provider, e.event_id)].webhook_id,
                            replace(e, key_seq=rows[(e.provider, e.event_id)].key_seq),
                        )
                        for e in group
                    ]
                    result = await broker.publish(stored, timeout_s=10)
                    if result.failed:
                        raise RuntimeError(f"{len(result.failed)} backlog messages not acked")
                published += len(result.acked)
        finally:
            await broker.close()
    return published
