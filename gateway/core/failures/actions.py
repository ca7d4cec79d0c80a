"""What an operator does about each error code: the "What to do" column of the error-code
reference (docs/reference/error-codes.md) and the runbook entry on a dead letter's page
in the console. Pure: one read-only mapping, with an entry for every `ErrorClass` (the
reference's test fails on a code without advice)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gateway.errors import ErrorClass

E = ErrorClass

# Advice shared by several codes.
_REPLAY = "Fix the cause, then `gateway dlq replay`; or `gateway dlq resolve` with a note."
_RETRIED = "Nothing, if it clears: it is retried. Parked rows replay once it is back."
_PROVIDER_DATA = (
    "The provider sent it this way: the event is kept and parked. Ask the provider, or "
    "resolve the row with a note."
)
_LISTING = "The entry is kept and parked; check the listing in the provider's dashboard."
_SIGNING = (
    "Check the provider's `scheme` and secrets; a proxy must not rewrite headers or body. "
    "Nothing was stored: the provider retries."
)
_FIX_FLAGS = "Correct the command's flags (see `--help`); nothing was changed."
_ROOT = "Not raised by itself; see the codes of its family."

#: What to do about each code, for the page's last column.
ACTIONS: Mapping[ErrorClass, str] = MappingProxyType(
    {
        E.SIGNATURE_INVALID: _ROOT,
        E.SIGNATURE_MISSING: _SIGNING,
        E.SIGNATURE_MALFORMED: _SIGNING,
        E.SIGNATURE_MISMATCH: _SIGNING + " During a rotation, configure both secrets.",
        E.TIMESTAMP_OUT_OF_WINDOW: "Check both sides' clocks (NTP); an old request replayed "
        "by someone else is refused on purpose.",
        E.UNAUTHORIZED: "Send the service's `[services.NAME] token` as the bearer token.",
        E.FORBIDDEN: "Publish within the service's `subjects`, or widen them.",
        E.UNKNOWN_PROVIDER: "Add `[providers.NAME]`, or fix the URL the sender posts to.",
        E.BODY_TOO_LARGE: "Raise `[http] max_body_bytes` (within the broker's max_payload), "
        "or have the sender send less.",
        E.BATCH_TOO_LARGE: "The sender must send fewer or smaller items a request; nothing "
        "of it was recorded, and the provider retries.",
        E.EVENT_ID_MISSING: "The sender must send a parsable request; the provider retries.",
        E.BAD_REQUEST: "The sender must fix the request; the message says what is wrong.",
        E.CLIENT_DISCONNECT: "Nothing: the sender left, so it never got a 2xx and retries.",
        E.PERMANENT: _ROOT,
        E.PAYLOAD_INVALID: _PROVIDER_DATA,
        E.PAYLOAD_NOT_JSON: _PROVIDER_DATA,
        E.PAYLOAD_NOT_OBJECT: _PROVIDER_DATA,
        E.EVENT_TYPE_MISSING: _PROVIDER_DATA,
        E.EVENT_TYPE_INVALID: _PROVIDER_DATA,
        E.EVENT_TYPE_NOT_ALLOWED: "Add the type to the provider's `event_types` if it is "
        "wanted, then replay; otherwise resolve the row.",
        E.EVENT_ID_INVALID: "The provider must send the event again with a usable id; the "
        "row stays parked until then.",
        E.HEADERS_INVALID: _PROVIDER_DATA,
        E.MISSING_FIELD: _PROVIDER_DATA,
        E.FIELD_TYPE_INVALID: _PROVIDER_DATA,
        E.PAYLOAD_TOO_LARGE: "Raise the NATS server's `max_payload` (and `[nats] "
        "max_payload_bytes`), then `gateway dlq replay`.",
        E.PUBLISH_ATTEMPTS_EXHAUSTED: "Check NATS and the stream (`/readyz`), then "
        "`gateway dlq replay`.",
        E.INVALID_AMOUNT: _PROVIDER_DATA,
        E.PROVIDER_AMOUNT_INVALID: _PROVIDER_DATA,
        E.UNSUPPORTED_PAIR: "Have the currency-service quote the pair, then replay.",
        E.UNKNOWN_ACCOUNT: "Open the account, then replay.",
        E.UNKNOWN_MERCHANT: "`gateway ledger open-account MERCHANT_ID`, then replay.",
        E.INSUFFICIENT_FUNDS: "Review by hand: fund the account and replay, or resolve.",
        E.EVENT_NOT_MAPPED: "Nothing moved: if the event should settle, map its type (or "
        "move the provider to `unmapped = count`), then resolve or replay the row.",
        E.EXCEEDS_PAYMENT: "Compare the payment's refunds and disputes with the provider's "
        "dashboard; resolve the row once the ledger matches it.",
        E.PAYMENT_MISMATCH: "The provider names another payment's currency: check the "
        "payment id in the event, then resolve.",
        E.LEDGER_ID_COLLISION: "Critical: run `gateway ledger check` and investigate before "
        "any replay.",
        E.LEDGER_ID_ALREADY_FAILED: "The ledger keeps refusing this id: resolve the row with "
        "a note after checking why it failed first.",
        E.LEDGER_REJECTED: "A gateway bug: report it with `gateway dlq show ID`.",
        E.LEDGER_IMBALANCE: "Critical: stop settling, run `gateway ledger check`, "
        "investigate before any replay.",
        E.PROVIDER_NOT_CONFIGURED: "Configure the provider again, or resolve the row.",
        E.EVENT_ID_CHANGED: "Restore the provider's id settings, or resolve the row.",
        E.EVENT_NOT_RECORDED: "The event's row is gone (removed by retention, say): resolve the "
        "dead letter.",
        E.PAYLOAD_REMOVED: "Have the provider resend the event, or resolve the row.",
        E.PROVIDER_API_AUTH: "Fix the key named by the provider's `api_key_env`.",
        E.PROVIDER_API_REFUSED: "Check the provider's API settings (`api_url`) and the message.",
        E.PROVIDER_API_REDIRECTED: "Point `api_url` at the URL the API redirects to.",
        E.PROVIDER_API_CERTIFICATE: "Fix `api_url`'s host or the machine's CA certificates.",
        E.PROVIDER_API_ANSWER_TOO_LARGE: "Raise `api_max_answer_bytes`, or narrow the window.",
        E.PROVIDER_API_ANSWER_INVALID: "Check `api_url` points at the provider's event listing.",
        E.CONFIRMATION_MISMATCH: "Check `api_url` reaches the provider's own API, then "
        "`gateway dlq replay --stage confirm`.",
        E.CONFIRMATION_REFUSED: "Check `api_key_env`, `api_url` and the message, then "
        "`gateway dlq replay --stage confirm`.",
        E.CONFIRMATION_NOT_FOUND: "A forged id: resolve the row. Else check the key in "
        "`api_key_env` is the account's, live or test as the payments are, then replay.",
        E.CONFIRMATION_ATTEMPTS_EXHAUSTED: "Once the provider's API answers, "
        "`gateway dlq replay --all --stage confirm`.",
        E.VERIFY_AMOUNT_MISMATCH: "The payer paid another amount than the order: the "
        "provider returns it; settle with the customer, then resolve the row.",
        E.VERIFY_DEADLINE_PASSED: "Read the inquiry's status in the message: `PAID` or "
        "`VERIFIED`, replay at once; `REVERSED` or `FAILED`, the money went back: resolve.",
        E.BACKFILL_PAGE_SKIPPED: "Fix the page's error (logged), then `gateway backfill` "
        "over the skipped window.",
        E.BACKFILL_ITEM_NOT_OBJECT: _LISTING,
        E.BACKFILL_ITEM_ID_INVALID: _LISTING,
        E.BACKFILL_ITEM_TIME_INVALID: _LISTING,
        E.BACKFILL_ITEM_UNENCODABLE: _LISTING,
        E.BACKFILL_ITEM_TOO_LARGE: _LISTING,
        E.ORDER_PREDECESSOR_MISSING: "Find the missing event (`gateway ordering keys --held`"
        " names the key); backfill or replay it, then `gateway dlq replay` the key's rows; "
        "or `gateway ordering release` to move past it.",
        E.BLOCKED_BY_PREDECESSOR: "Fix the event holding the key, then `gateway dlq replay`:"
        " the key's rows run in order. Or `gateway ordering release`, then replay.",
        E.FORWARD_REFUSED: "Fix the target's handler (the row's message holds the start of"
        " its answer), then `gateway dlq replay`.",
        E.FORWARD_ATTEMPTS_EXHAUSTED: "Bring the target back, then `gateway dlq replay`: "
        "the delivery keeps its `webhook-id`, so the target can de-duplicate it.",
        E.STREAM_MESSAGE_UNREADABLE: "The row keeps the message's subject, headers and body"
        " as they were on the stream (`gateway dlq show ID`): find what published it without"
        " the gateway's headers, then resolve the row with a note. A replay fails again.",
        E.TRANSIENT: _RETRIED,
        E.DATABASE_UNAVAILABLE: "Check PostgreSQL (`/readyz`). " + _RETRIED,
        E.OVERLOADED: "Senders retry after `Retry-After`; if it lasts, add writers or "
        "gateway processes.",
        E.BROKER_UNAVAILABLE: "Check NATS (`/readyz`). " + _RETRIED,
        E.RATE_SERVICE_UNAVAILABLE: "Check the currency-service. " + _RETRIED,
        E.RATE_UNAVAILABLE: "Check the currency-service and Redis. " + _RETRIED,
        E.RATE_STALE: "Check the currency-service. " + _RETRIED,
        E.LEDGER_UNAVAILABLE: "Check the ledger; retries reuse the same transfer ids, so "
        "nothing posts twice. " + _RETRIED,
        E.LEDGER_BATCH_RACED: "Nothing: the batch is posted again.",
        E.PAYMENT_NOT_SETTLED: "Nothing if the payment arrives; else find the payment, "
        "then replay.",
        E.ALERT_NOT_DELIVERED: "Check `[alerts] webhook_url`; the notice is sent again.",
        E.PROVIDER_API_UNAVAILABLE: "Nothing: the next pass continues from the cursor.",
        E.UNEXPECTED_ERROR: "A bug: read the type in the message and the stack with "
        "`gateway dlq show ID`, fix it, then replay. Rows from older releases carry "
        "`UNEXPECTED_<TYPE>` (such as `UNEXPECTED_KEYERROR`) and mean the same.",
        E.GATEWAY_ERROR: "A bug: report it with the log line and `gateway dlq show ID`.",
        E.DATABASE_ERROR: "Read the SQLSTATE in the message; a schema problem needs "
        "`gateway migrate`.",
        E.CONFIG_ERROR: "Fix the key the message names.",
        E.STREAM_MISMATCH: "`gateway migrate` updates the stream, or name another one.",
        E.STREAM_UPDATE_REFUSED: "Some stream fields are fixed: create a new stream and "
        "name it in `[nats] stream`.",
        E.MIGRATIONS_MISSING: "Reinstall the package: its `sql/` files are missing.",
        E.OUTBOX_CURSOR_AHEAD: "The database was restored into another cluster: re-base "
        "the cursor as the storage documentation describes; the relay publishes nothing "
        "until then.",
        E.DATABASE_NOT_DURABLE: "Give the primary a synchronous standby "
        "(`synchronous_standby_names`, `synchronous_commit = on`) and let it stream, grant "
        "the gateway's role `pg_monitor` if the message says so, or set "
        "`require_synchronous_standby = false` to run with the risk (a warning is logged).",
        E.USAGE: _ROOT,
        E.DLQ_USAGE: _FIX_FLAGS,
        E.EVENTS_USAGE: _FIX_FLAGS,
        E.BACKFILL_USAGE: _FIX_FLAGS,
        E.ROW_NOT_FOUND: _ROOT,
        E.DLQ_ROW_NOT_FOUND: "Check the id with `gateway dlq list`.",
        E.ORDERING_USAGE: _FIX_FLAGS,
        E.FORWARD_USAGE: _FIX_FLAGS,
        E.ORDER_KEY_NOT_FOUND: "Check the provider and key with `gateway ordering keys`.",
        E.EVENT_ROW_NOT_FOUND: "Check the id with `gateway events list`.",
        E.NO_HANDLER: "Rows of that stage cannot be replayed: resolve them by hand.",
        E.PUBLISH_REJECTED: "Fix the event or the token; the status and detail say which.",
        E.PUBLISH_UNAVAILABLE: "Check the gateway's `/readyz`, then publish again.",
        E.SEND_FAILED: "Check the URL and that the gateway listens there.",
    }
)
