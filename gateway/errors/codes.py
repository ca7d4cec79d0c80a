"""The stored error codes: every value `dlq_webhooks.error_class` (and the settlement
row's `error_class`, the `gateway_dlq_total` label, alert text and `--error-class`) can hold.

A code is a contract: dashboards, alert rules and operators' scripts match on it, so a code
is renamed never and removed only when nothing can produce it any more. Each member names
its family (what happens to an event that fails with it) and says in one line what it
means; the documentation's table of error codes is generated from this enum.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from enum import auto
from typing import Self


class Family(enum.StrEnum):
    """What happens to an event, a request or a command that fails with a code."""

    description: str

    # The default lets `Family(value)` look a member up (members always pass it).
    def __new__(cls, value: str, description: str = "") -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    REJECTED = "rejected", "The request is answered 4xx (or not at all); nothing is stored."
    PERMANENT = "permanent", "Retrying cannot help: the event is parked in the DLQ at once."
    TRANSIENT = "transient", "Retried with backoff and jitter; parked once the schedule is spent."
    UNEXPECTED = (
        "unexpected",
        "Not classified (a bug): logged with its stack, retried as transient.",
    )
    INTERNAL = "internal", "A gateway invariant or a PostgreSQL refusal: retried as unexpected."
    FATAL = "fatal", "The process does not start, or stops, and says why."
    OPERATOR = "operator", "A command's input cannot be used; the command exits, nothing changes."
    CLIENT = "client", "Raised to the caller of the publishing client or `gateway sign --send`."


_Member = tuple[auto, Family, str]


def _of(family: Family) -> Callable[[str], _Member]:
    """A member of `family` described by one line; `auto()` makes its value its name."""

    def member(description: str) -> _Member:
        return auto(), family, description

    return member


_rejected, _permanent, _transient = (
    _of(Family.REJECTED),
    _of(Family.PERMANENT),
    _of(Family.TRANSIENT),
)
_unexpected, _internal, _fatal = _of(Family.UNEXPECTED), _of(Family.INTERNAL), _of(Family.FATAL)
_operator, _client = _of(Family.OPERATOR), _of(Family.CLIENT)


class ErrorClass(enum.StrEnum):
    """A stable error code; a member's name is its value."""

    family: Family
    description: str

    # The defaults let `ErrorClass(code)` look a member up (members always pass both).
    def __new__(cls, value: str, family: Family = Family.UNEXPECTED, description: str = "") -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.family = family
        member.description = description
        return member

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        return name  # `auto()` gives the member's own name: the code reads the same everywhere

    # --- rejected: answered before anything is stored ----------------------------------
    SIGNATURE_INVALID = _rejected("The request's signature cannot be trusted.")
    SIGNATURE_MISSING = _rejected("A header the signature scheme needs is absent.")
    SIGNATURE_MALFORMED = _rejected("A signature header cannot be parsed.")
    SIGNATURE_MISMATCH = _rejected("No configured secret produces any signature offered.")
    TIMESTAMP_OUT_OF_WINDOW = _rejected("The signed timestamp is too old or too far ahead.")
    UNAUTHORIZED = _rejected("An internal publisher's bearer token is missing or unknown.")
    FORBIDDEN = _rejected("A publisher asked for a subject outside its scope.")
    UNKNOWN_PROVIDER = _rejected("No provider of that name is configured.")
    BODY_TOO_LARGE = _rejected("The body exceeds `http.max_body_bytes`.")
    BATCH_TOO_LARGE = _rejected(
        "A request carries more events, or a larger one, than its provider's batch bounds."
    )
    EVENT_ID_MISSING = _rejected("The request cannot be parsed enough to find its event id.")
    BAD_REQUEST = _rejected("The request is malformed in a way the sender must fix.")
    CLIENT_DISCONNECT = _rejected("The client left before its body arrived; nothing was recorded.")

    # --- permanent: parked at once ------------------------------------------------------
    PERMANENT = _permanent("The root of the permanent family (never raised by itself).")
    PAYLOAD_INVALID = _permanent("A verified event's body fails validation.")
    PAYLOAD_NOT_JSON = _permanent("The body is not valid JSON where JSON is required.")
    PAYLOAD_NOT_OBJECT = _permanent("The body is JSON but not an object.")
    EVENT_TYPE_MISSING = _permanent("The event carries no event type, so it has no subject.")
    EVENT_TYPE_INVALID = _permanent("The event type is too long or holds control characters.")
    EVENT_TYPE_NOT_ALLOWED = _permanent("The event type is outside the provider's `event_types`.")
    EVENT_ID_INVALID = _permanent(
        "The event id is unusable; the event is kept under its body digest."
    )
    HEADERS_INVALID = _permanent("A header held a NUL; it was stored with the NUL replaced.")
    MISSING_FIELD = _permanent("A field the settlement needs is absent; the message names it.")
    FIELD_TYPE_INVALID = _permanent("A field has the wrong type or shape; the message names it.")
    PAYLOAD_TOO_LARGE = _permanent("The event with its headers exceeds the broker's `max_payload`.")
    PUBLISH_ATTEMPTS_EXHAUSTED = _permanent(
        "Publishing failed `outbox.max_publish_attempts` times."
    )
    INVALID_AMOUNT = _permanent("An amount is zero, negative, or rounds to nothing when converted.")
    PROVIDER_AMOUNT_INVALID = _permanent("An amount the provider's minor-unit rules rule out.")
    UNSUPPORTED_PAIR = _permanent("The currency-service does not quote this currency pair.")
    UNKNOWN_ACCOUNT = _permanent("A ledger account the transfer refers to does not exist.")
    UNKNOWN_MERCHANT = _permanent("The merchant has no ledger account.")
    INSUFFICIENT_FUNDS = _permanent("The transfer would take an account below zero.")
    EVENT_NOT_MAPPED = _permanent(
        "A payment provider's event moves no money and its provider has `unmapped = park`."
    )
    EXCEEDS_PAYMENT = _permanent("A refund or chargeback is larger than its payment's capture.")
    PAYMENT_MISMATCH = _permanent(
        "A refund or dispute is in another currency than the payment it names."
    )
    LEDGER_ID_COLLISION = _permanent(
        "A transfer or account id exists with other fields (critical)."
    )
    LEDGER_ID_ALREADY_FAILED = _permanent("The ledger refused this transfer id before, for good.")
    LEDGER_REJECTED = _permanent("The ledger refused a transfer as malformed (a gateway bug).")
    LEDGER_IMBALANCE = _permanent("Total debits differ from total credits (critical).")
    PROVIDER_NOT_CONFIGURED = _permanent("Replay: the row's provider is no longer configured.")
    EVENT_ID_CHANGED = _permanent(
        "Replay: the configuration reads another event id from the request."
    )
    EVENT_NOT_RECORDED = _permanent("Replay: the event has no `processed_webhooks` row.")
    PAYLOAD_REMOVED = _permanent("Retention removed the payload: nothing is left to replay.")
    PROVIDER_API_AUTH = _permanent("Backfill: the provider's API refused the credentials.")
    PROVIDER_API_REFUSED = _permanent("Backfill: the provider's API refused the request (4xx).")
    PROVIDER_API_REDIRECTED = _permanent("Backfill: the provider's API answered a redirect.")
    PROVIDER_API_CERTIFICATE = _permanent("Backfill: the API's TLS certificate is not trusted.")
    PROVIDER_API_ANSWER_TOO_LARGE = _permanent(
        "Backfill: an answer grew past `api_max_answer_bytes`."
    )
    PROVIDER_API_ANSWER_INVALID = _permanent(
        "Backfill: an answer is not JSON of the listing's shape."
    )
    BACKFILL_PAGE_SKIPPED = _permanent(
        "Backfill: a page failed `api_page_attempts` passes in a row."
    )
    BACKFILL_ITEM_NOT_OBJECT = _permanent("Backfill: a listing's entry is not a JSON object.")
    BACKFILL_ITEM_ID_INVALID = _permanent(
        "Backfill: an entry's id is unusable; kept under its digest."
    )
    BACKFILL_ITEM_TIME_INVALID = _permanent("Backfill: an entry's time is missing or unreadable.")
    BACKFILL_ITEM_UNENCODABLE = _permanent("Backfill: an entry cannot be serialised as sent.")
    BACKFILL_ITEM_TOO_LARGE = _permanent("Backfill: an entry's body exceeds `http.max_body_bytes`.")
    CONFIRMATION_MISMATCH = _permanent(
        "Confirm: the provider's API answered about another object than the webhook named."
    )
    CONFIRMATION_REFUSED = _permanent(
        "Confirm: the provider's API refused the fetch (4xx, a redirect, an untrusted "
        "certificate, an answer too large or not JSON)."
    )
    CONFIRMATION_NOT_FOUND = _permanent(
        "Confirm: the provider's API knows no such object (a forged or mistyped id, or an "
        "API key of another account or mode)."
    )
    CONFIRMATION_ATTEMPTS_EXHAUSTED = _permanent(
        "Confirm: the provider's API failed every attempt of `[confirm]`'s schedule."
    )
    VERIFY_AMOUNT_MISMATCH = _permanent(
        "Confirm: the provider refused to verify a payment for the order's amount (a payer "
        "who paid another amount); never verified, so the provider returns the money."
    )
    VERIFY_DEADLINE_PASSED = _permanent(
        "Confirm: the provider's deadline to verify a payment passed before a verify "
        "succeeded; parked with the payment's status as the provider's inquiry tells it."
    )
    ORDER_PREDECESSOR_MISSING = _permanent(
        "An earlier event of its key never came within `ordering.gap_timeout_s`; the key is held."
    )
    BLOCKED_BY_PREDECESSOR = _permanent("An earlier event of its key is parked; the key is held.")
    FORWARD_REFUSED = _permanent("A forwarding target answered 4xx; its destination parks those.")
    FORWARD_ATTEMPTS_EXHAUSTED = _permanent(
        "A forwarding target failed every attempt of the destination's retry schedule."
    )
    STREAM_MESSAGE_UNREADABLE = _permanent(
        "A stream message lacks a gateway header its consumer needs, or holds one it cannot read."
    )

    # --- transient: retried on the dependency's schedule --------------------------------
    TRANSIENT = _transient("A dependency had no answer yet (no rate for a pair, say).")
    DATABASE_UNAVAILABLE = _transient("PostgreSQL cannot be reached or cannot commit right now.")
    OVERLOADED = _transient("The acceptance queue is full or the gateway is stopping (503).")
    BROKER_UNAVAILABLE = _transient("NATS cannot be reached right now.")
    RATE_SERVICE_UNAVAILABLE = _transient("The currency-service did not answer usefully.")
    RATE_UNAVAILABLE = _transient("The currency-service is down and no cached rate exists.")
    RATE_STALE = _transient("The currency-service is down and the cached rate is too old.")
    LEDGER_UNAVAILABLE = _transient("The ledger did not answer in time; the outcome is unknown.")
    LEDGER_BATCH_RACED = _transient("A batch's transfer id was committed elsewhere meanwhile.")
    PAYMENT_NOT_SETTLED = _transient(
        "A refund, reversal or chargeback arrived before its payment settled."
    )
    ALERT_NOT_DELIVERED = _transient("The alert webhook did not answer 2xx; the notice is owed.")
    PROVIDER_API_UNAVAILABLE = _transient(
        "Backfill: the provider's API kept failing past the deadline."
    )

    # --- unexpected and internal: retried like transient failures ------------------------
    UNEXPECTED_ERROR = _unexpected("An exception outside the tree; its type leads the message.")
    GATEWAY_ERROR = _internal("An invariant the gateway checks does not hold.")
    DATABASE_ERROR = _internal("PostgreSQL refused a statement for a reason retrying cannot fix.")

    # --- fatal: the process does not start, or stops -------------------------------------
    CONFIG_ERROR = _fatal("A setting is missing or invalid; the message names the key.")
    STREAM_MISMATCH = _fatal("The NATS stream differs from the configured one.")
    STREAM_UPDATE_REFUSED = _fatal("The NATS server refused `gateway migrate`'s stream update.")
    MIGRATIONS_MISSING = _fatal("No migration files were found: the installation is incomplete.")
    OUTBOX_CURSOR_AHEAD = _fatal(
        "The outbox cursor names transactions this database has not reached."
    )
    DATABASE_NOT_DURABLE = _fatal(
        "`database.require_synchronous_standby` is set and commits do not wait for a standby."
    )

    # --- operator: a command's input -------------------------------------------------
    USAGE = _operator("The root of the usage errors (never raised by itself).")
    DLQ_USAGE = _operator("`gateway dlq` flags or values cannot be used.")
    EVENTS_USAGE = _operator("`gateway events` flags or values cannot be used.")
    BACKFILL_USAGE = _operator(
        "`gateway backfill` flags or the provider's API settings cannot be used."
    )
    ROW_NOT_FOUND = _operator("The root of the missing-row errors (never raised by itself).")
    DLQ_ROW_NOT_FOUND = _operator("An id the operator named has no dead-letter row.")
    EVENT_ROW_NOT_FOUND = _operator("An id the operator named has no `processed_webhooks` row.")
    ORDERING_USAGE = _operator("`gateway ordering` flags or values cannot be used.")
    FORWARD_USAGE = _operator("`gateway forward` or `gateway listen` flags cannot be used.")
    ORDER_KEY_NOT_FOUND = _operator("The key the operator named has no ordering state.")
    NO_HANDLER = _operator("Replay has no handler for the row's stage; the row is left unchanged.")

    # --- client: reported to whoever called ----------------------------------------------
    PUBLISH_REJECTED = _client("The gateway refused a published event (4xx).")
    PUBLISH_UNAVAILABLE = _client(
        "The gateway could not record a published event after every retry."
    )
    SEND_FAILED = _client("`gateway sign --send` got no HTTP answer from the URL.")
