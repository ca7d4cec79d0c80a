"""Mollie's answer to `GET /v2/payments/{id}?embed=refunds,chargebacks` read into the
changes it holds that move, or may move, money (`Confirmed` items). Pure.

The answer is the payment (`resource` `payment`, its `status`, `amount`, `metadata` and
the times of its changes: `authorizedAt`, `paidAt`, `canceledAt`, `expiredAt`,
`failedAt`) with every refund and chargeback of it under `_embedded` (the shapes of the
`mollie-api-python` fixtures `tests/responses/payment_single.json`,
`refunds_list.json`, `payment_chargebacks_list.json`, and of docs.mollie.com's payment,
refund and chargeback objects).

The answer says where a payment stands now, not what happened since the last webhook,
so each change gets an id of its own, made of the payment's id and what changed, and
the set of changes an answer holds only grows as the payment moves: an answer names
again every change an earlier answer named, under the same id, so the idempotency gate
turns those into duplicates and only the new ones are published. Whatever the
webhooks that were missed, the events recorded end the same.

Each change, its event id and type, and its movement (`mollie.instruction`):

- authorised (`authorizedAt`, or status `authorized`): `tr_x:authorized`,
  `payment.authorized`, an authorisation;
- paid (`paidAt`, or status `paid`): `tr_x:paid`, `payment.paid`, a capture;
- authorised, never paid, and ended (status `canceled`, `expired` or `failed`):
  `tr_x:{status}`, `payment.{status}`, the void of the authorisation;
- a refund taken (status `processing`, `refunded` or `failed`): `tr_x:refund:re_x`,
  `refund.refunded`, a refund;
- a refund failed (status `failed`): `tr_x:refund:re_x:failed`, `refund.failed`, a
  refund reversal;
- a chargeback (every one listed): `tr_x:chargeback:chb_x`, `chargeback.received`, a
  chargeback;
- a chargeback reversed (its `reversedAt`): `tr_x:chargeback:chb_x:reversed`,
  `chargeback.reversed`, a chargeback reversal.

Why these statuses. A payment `open` or `pending`, or one that was never authorised and
ended `canceled`, `expired` or `failed`, moved no money. A refund counts once Mollie can
no longer cancel it: `processing` ("The refund is being processed. Cancellation is no
longer possible", docs.mollie.com/payments/refunds), then `refunded`; those are also
the refund states Mollie calls the payment's webhook for (with `failed`). A `queued` or
`pending` refund may still be canceled, and a `canceled` one never left: they move
nothing. A `failed` refund failed after processing and "the funds will be returned to
your account": it is the refund and its reversal, both, so an answer that shows it
`failed` first holds the same two changes as answers that showed it `processing`
before. A chargeback takes its `amount` when it is received; `reversedAt` gives it back.
A refund's or chargeback's status that is none of these moves nothing (a status Mollie
adds later is not guessed at).

In the order they happened: the payment's own changes first (authorised, then paid or
ended), then the refunds, chargebacks and reversals by their time (a refund's and a
chargeback's `createdAt`, a reversal's `reversedAt`; a refund's failure, which has no
time of its own, right after its refund).

Each item's body is a compact JSON object (`body`): the event's id and type, the
payment, the object that changed, its `amount` as Mollie wrote it (read exactly by
`mollie.instruction`), when, and the payment's `metadata` (its merchant). It never has
an `id` or a `type`: see `mollie.document`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.core.providers.base import Confirmed
from gateway.errors import ConfirmationMismatch, PayloadInvalid

#: Mollie's ids: a prefix and an opaque token of ASCII letters and digits.
PAYMENT_ID = re.compile(r"tr_[A-Za-z0-9]{1,64}", re.ASCII)
REFUND_ID = re.compile(r"re_[A-Za-z0-9]{1,64}", re.ASCII)
CHARGEBACK_ID = re.compile(r"chb_[A-Za-z0-9]{1,64}", re.ASCII)
#: The most refunds, and the most chargebacks, one answer may list: far more than a
#: payment has (the refunds of a payment are bounded by its amount, plus at most €25).
FOLLOW_UPS_MAX = 1_000
#: Mollie keeps at most 1 KB of metadata ("up to approximately 1kB", docs.mollie.com's
#: Create payment); more than four times that is not Mollie's answer.
METADATA_BYTES_MAX = 4_096
#: An amount's `value` and `currency`, and a time, as Mollie writes them, are short.
_TEXT_MAX = 64

#: The refund states in which the money has left (see the module's docstring).
REFUND_TAKEN = frozenset({"processing", "refunded", "failed"})
#: How an authorised payment that was never paid ends: its reservation is released.
ENDED_UNPAID = {"canceled": "canceledAt", "expired": "expiredAt", "failed": "failedAt"}

#: A follow-up change: when, the order it was read in, its item.
Timed = tuple[datetime, int, Confirmed]
#: What changed: the object (`payment`, `refund`, `chargeback`), its id, its status.
Of = tuple[str, str, str | None]


def payment_id_of(doc: Any) -> str:
    """The payment a webhook's document names; `PayloadInvalid` unless it is one."""
    found = doc.get("id") if isinstance(doc, Mapping) else None
    if not isinstance(found, str) or not PAYMENT_ID.fullmatch(found):
        raise PayloadInvalid("no Mollie payment is named (tr_ and 1 to 64 letters or digits)")
    return found


def confirmed(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
    """The changes of the payment `doc` names that `answer` (Mollie's payment, parsed)
    holds, in the order they happened; `ConfirmationMismatch` when the answer is about
    another payment, `PayloadInvalid` when it is not a Mollie payment."""
    wanted = payment_id_of(doc)
    if not isinstance(answer, Mapping):
        raise PayloadInvalid("Mollie's answer is not a JSON object")
    if answer.get("resource") != "payment":
        raise PayloadInvalid("Mollie's answer is not a payment (its resource is not 'payment')")
    found = answer.get("id")
    if not isinstance(found, str):
        raise PayloadInvalid("Mollie's payment has no id")
    if found != wanted:
        raise ConfirmationMismatch(f"asked for payment {wanted}, Mollie answered {found[:80]!r}")
    embedded = answer.get("_embedded")
    if embedded is None:
        embedded = {}
    elif not isinstance(embedded, Mapping):
        raise PayloadInvalid("Mollie's payment's _embedded is not an object")
    payment = _Payment(wanted, _metadata(answer))
    own = payment.own_changes(answer)
    # Sorted by time, then the order read: a failure stays right after its refund.
    timed: list[Timed] = []
    for refund in _listed(embedded, "refunds"):
        timed.extend(payment.refund_changes(refund, len(timed)))
    for chargeback in _listed(embedded, "chargebacks"):
        timed.extend(payment.chargeback_changes(chargeback, len(timed)))
    timed.sort(key=lambda one: (one[0], one[1]))
    return (*own, *(item for _, _, item in timed))


class _Payment:
    """One payment's changes, each as its `Confirmed` item."""

    def __init__(self, payment_id: str, metadata: Any) -> None:
        self.id = payment_id
        self.metadata = metadata

    def item(
        self, change: str, event_type: str, of: Of, amount: Mapping[str, str], at: str | None
    ) -> Confirmed:
        """The item of `change`, its event id's suffix."""
        event_id = f"{self.id}:{change}"
        obj, obj_id, status = of
        doc = {"event_id": event_id, "event_type": event_type, "payment_id": self.id,
               "object": obj, "object_id": obj_id, "status": status, "amount": amount,
               "at": at, "metadata": self.metadata}  # fmt: skip
        return Confirmed(event_id, event_type, orjson.dumps(doc))

    def own_changes(self, answer: Mapping[str, Any]) -> list[Confirmed]:
        """Authorised, then paid or ended unpaid."""
        where = "the payment"
        status = _text(answer, "status", where)
        amount = _money(answer, "amount", where)
        authorized_at = _optional_text(answer, "authorizedAt", where)
        paid_at = _optional_text(answer, "paidAt", where)
        of: Of = ("payment", self.id, status)
        items = []
        authorized = authorized_at is not None or status == "authorized"
        if authorized:
            items.append(self.item("authorized", "payment.authorized", of, amount, authorized_at))
        if paid_at is not None or status == "paid":
            # What was captured, where Mollie says (a capture of part of an authorisation).
            if answer.get("amountCaptured") is not None:
                amount = _money(answer, "amountCaptured", where)
            items.append(self.item("paid", "payment.paid", of, amount, paid_at))
        elif authorized and status in ENDED_UNPAID:
            ended_at = _optional_text(answer, ENDED_UNPAID[status], where)
            items.append(self.item(status, f"payment.{status}", of, amount, ended_at))
        return items

    def refund_changes(self, refund: Any, seq: int) -> list[Timed]:
        """A refund once taken, and its reversal once failed."""
        refund_id = self.follow_up_id(refund, "refund", REFUND_ID)
        where = f"refund {refund_id}"
        status = _text(refund, "status", where)
        if status not in REFUND_TAKEN:
            return []
        amount = _money(refund, "amount", where)
        created_at = _text(refund, "createdAt", where)
        when, change = _time(created_at, where), f"refund:{refund_id}"
        of: Of = ("refund", refund_id, status)
        found = [(when, seq, self.item(change, "refund.refunded", of, amount, created_at))]
        if status == "failed":  # no time of its own: right after its refund
            failed = self.item(f"{change}:failed", "refund.failed", of, amount, None)
            found.append((when, seq + 1, failed))
        return found

    def chargeback_changes(self, chargeback: Any, seq: int) -> list[Timed]:
        """A chargeback, and its reversal once reversed."""
        chargeback_id = self.follow_up_id(chargeback, "chargeback", CHARGEBACK_ID)
        where = f"chargeback {chargeback_id}"
        amount = _money(chargeback, "amount", where)
        created_at = _text(chargeback, "createdAt", where)
        reversed_at = _optional_text(chargeback, "reversedAt", where)
        change, of = f"chargeback:{chargeback_id}", ("chargeback", chargeback_id, None)
        received = self.item(change, "chargeback.received", of, amount, created_at)
        found = [(_time(created_at, where), seq, received)]
        if reversed_at is not None:
            reversal = self.item(
                f"{change}:reversed", "chargeback.reversed", of, amount, reversed_at
            )
            found.append((_time(reversed_at, where), seq + 1, reversal))
        return found

    def follow_up_id(self, obj: Any, resource: str, shape: re.Pattern[str]) -> str:
        """A refund's or chargeback's id, checked to be of this payment."""
        if not isinstance(obj, Mapping) or obj.get("resource", resource) != resource:
            raise PayloadInvalid(f"a {resource} of Mollie's payment is not a {resource} object")
        found = obj.get("id")
        if not isinstance(found, str) or not shape.fullmatch(found):
            raise PayloadInvalid(f"a {resource} of Mollie's payment has no {resource} id")
        of = obj.get("paymentId", self.id)
        if of != self.id:
            raise ConfirmationMismatch(
                f"{resource} {found} is of payment {str(of)[:80]!r}, not {self.id}"
            )
        return found


def _listed(embedded: Mapping[str, Any], name: str) -> list[Any]:
    found = embedded.get(name)
    if found is None:
        return []
    if not isinstance(found, list):
        raise PayloadInvalid(f"Mollie's payment's _embedded.{name} is not a list")
    if len(found) > FOLLOW_UPS_MAX:
        raise PayloadInvalid(
            f"Mollie's payment lists {len(found)} {name} (at most {FOLLOW_UPS_MAX})"
        )
    return found


def _text(obj: Mapping[str, Any], key: str, where: str) -> str:
    found = _optional_text(obj, key, where)
    if found is None:
        raise PayloadInvalid(f"{where} has no {key}")
    return found


def _optional_text(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    """A short string, or None when absent or null; `PayloadInvalid` for anything else."""
    found = obj.get(key)
    if found is None:
        return None
    if not isinstance(found, str) or not found or len(found) > _TEXT_MAX:
        raise PayloadInvalid(f"{where}'s {key} is not a string of 1 to {_TEXT_MAX} characters")
    return found


def _money(obj: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    """Mollie's `{"value", "currency"}` as written: read exactly by the movements."""
    found = obj.get(key)
    if not isinstance(found, Mapping):
        raise PayloadInvalid(f"{where}'s {key} is not an amount object")
    return {name: _text(found, name, f"{where}'s {key}") for name in ("value", "currency")}


def _time(text: str, where: str) -> datetime:
    """An ISO 8601 time as Mollie writes it (`2018-03-14T17:09:02.0Z`, `...+00:00`)."""
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise PayloadInvalid(f"{where}'s time {text!r} is not ISO 8601") from None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _metadata(answer: Mapping[str, Any]) -> Any:
    """The payment's `metadata` (any JSON, or null), bounded."""
    metadata = answer.get("metadata")
    try:
        size = len(orjson.dumps(metadata))
    except TypeError:
        raise PayloadInvalid("Mollie's payment's metadata is not JSON") from None
    if size > METADATA_BYTES_MAX:
        raise PayloadInvalid(
            f"Mollie's payment's metadata is {size} bytes (at most {METADATA_BYTES_MAX})"
        )
    return metadata
