"""The gateway's one exception tree.

Two roots carry the retry decision: anything under `TransientError` may succeed if
tried again later; anything under `PermanentError` never will, so it goes straight to
the dead-letter table. Classification is an `isinstance` check, never a look at the
message text. Adapters translate their library's errors into these with `raise ... from`.
"""

from __future__ import annotations

from collections.abc import Sequence


class GatewayError(Exception):
    """Base class of every error the gateway raises on purpose."""

    #: Short, stable machine name stored in `dlq_webhooks.error_class`.
    error_class: str = "GATEWAY_ERROR"
    critical: bool = False  # True: also log at CRITICAL and send an alert

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


# --- configuration -------------------------------------------------------------------


class ConfigError(GatewayError):
    """A setting is missing or invalid; the message names the key."""

    error_class = "CONFIG_ERROR"

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"config error: {key}: {problem}")
        self.key = key
        self.problem = problem


# --- request verification (answered 4xx, nothing stored) -----------------------------


class RequestRejected(GatewayError):
    """The request is refused before anything is stored."""

    status_code: int = 400


class SignatureError(RequestRejected):
    """The request's signature cannot be trusted (answered 401)."""

    status_code = 401
    error_class = "SIGNATURE_INVALID"


class SignatureMissing(SignatureError):
    """A header the signature scheme needs is absent."""

    error_class = "SIGNATURE_MISSING"


class SignatureMalformed(SignatureError):
    """A signature header is present but cannot be parsed."""

    error_class = "SIGNATURE_MALFORMED"


class SignatureMismatch(SignatureError):
    """No configured secret produces any of the signatures offered."""

    error_class = "SIGNATURE_MISMATCH"


class TimestampOutOfWindow(SignatureError):
    """The signed timestamp is too old or too far in the future."""

    error_class = "TIMESTAMP_OUT_OF_WINDOW"


class Unauthorized(RequestRejected):
    """An internal publisher's bearer token is missing or unknown (401)."""

    status_code = 401
    error_class = "UNAUTHORIZED"


class Forbidden(RequestRejected):
    """An authenticated publisher asked for a subject outside its scope (403)."""

    status_code = 403
    error_class = "FORBIDDEN"


class UnknownProvider(RequestRejected):
    """No provider of that name is configured (404)."""

    status_code = 404
    error_class = "UNKNOWN_PROVIDER"


class BodyTooLarge(RequestRejected):
    """The body exceeds `http.max_body_bytes` (413)."""

    status_code = 413
    error_class = "BODY_TOO_LARGE"


class EventIdMissing(RequestRejected):
    """The request cannot be parsed enough to find its event id (400)."""

    status_code = 400
    error_class = "EVENT_ID_MISSING"


class BadRequest(RequestRejected):
    """The request is malformed in a way the sender must fix (400)."""

    status_code = 400
    error_class = "BAD_REQUEST"


class ClientGone(GatewayError):
    """The client disconnected before its body arrived; nothing was recorded."""

    error_class = "CLIENT_DISCONNECT"


# --- permanent failures: retrying cannot help, straight to the DLQ --------------------


class PermanentError(GatewayError):
    """Retrying will not help; the event goes to the dead-letter table at once."""

    error_class = "PERMANENT"


class PayloadInvalid(PermanentError):
    """A verified event's body fails validation (not JSON, wrong shape)."""

    error_class = "PAYLOAD_INVALID"


class PayloadNotJson(PayloadInvalid):
    """The body of a verified event is not valid JSON where JSON is required."""

    error_class = "PAYLOAD_NOT_JSON"


class EventTypeMissing(PayloadInvalid):
    """A verified event carries no event type, so it has no subject to go to."""

    error_class = "EVENT_TYPE_MISSING"


class EventTypeInvalid(PayloadInvalid):
    """The event type is too long or holds control characters, so it cannot be published."""

    error_class = "EVENT_TYPE_INVALID"


class EventTypeNotAllowed(PayloadInvalid):
    """The event type is outside the provider's `event_types` allow-list."""

    error_class = "EVENT_TYPE_NOT_ALLOWED"


class EventIdInvalid(PayloadInvalid):
    """A verified webhook has no usable event id (absent, not a string or an integer,
    blank, over 255 characters, control characters); it is kept under its body digest."""

    error_class = "EVENT_ID_INVALID"


class HeadersInvalid(PayloadInvalid):
    """A header holds a NUL, which cannot be stored; it was stored with the NUL replaced."""

    error_class = "HEADERS_INVALID"


class PublishRefused(PermanentError):
    """The broker refuses the event for good; it is parked at stage `publish`."""

    error_class = "PUBLISH_REFUSED"


class PayloadTooLarge(PublishRefused):
    """The event with its NATS headers exceeds the broker's `max_payload`."""

    error_class = "PAYLOAD_TOO_LARGE"


class PublishAttemptsExhausted(PermanentError):
    """The event failed to publish `outbox.max_publish_attempts` times; it is parked."""

    error_class = "PUBLISH_ATTEMPTS_EXHAUSTED"


# --- storage ---------------------------------------------------------------------------


class DatabaseError(GatewayError):
    """PostgreSQL refused a statement for a reason retrying will not fix."""

    error_class = "DATABASE_ERROR"

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class MigrationsMissing(GatewayError):
    """No migration files were found: the installation is incomplete (nothing applied)."""

    error_class = "MIGRATIONS_MISSING"


class StreamMismatch(ConfigError):
    """The stream on the NATS server is not the one configured (subjects, retention,
    storage, duplicate window, replicas); only `gateway migrate` changes it."""

    error_class = "STREAM_MISMATCH"

    def __init__(self, stream: str, differences: Sequence[object]) -> None:
        super().__init__(
            "nats.stream",
            f"stream {stream} exists on the NATS server with another configuration: "
            f"{'; '.join(map(str, differences))}; run 'gateway migrate' to update it, or "
            "name another stream",
        )
        self.differences = tuple(differences)


class StreamUpdateRefused(GatewayError):
    """The NATS server refused `gateway migrate`'s update of the stream (some fields,
    such as the storage type, are fixed once a stream exists)."""

    error_class = "STREAM_UPDATE_REFUSED"


class OutboxCursorAhead(GatewayError):
    """The outbox cursor names transactions this database has not reached: it was
    restored into another cluster. The relay stops rather than skip rows (README,
    "Storage")."""

    error_class = "OUTBOX_CURSOR_AHEAD"


# --- transient failures: retry with backoff ------------------------------------------


class TransientError(GatewayError):
    """May succeed if tried again later."""

    error_class = "TRANSIENT"


class DatabaseUnavailable(TransientError):
    """PostgreSQL cannot be reached or cannot commit right now."""

    error_class = "DATABASE_UNAVAILABLE"


class Overloaded(TransientError):
    """The acceptance queue is full; the sender should retry shortly (503)."""

    error_class = "OVERLOADED"


class BrokerUnavailable(TransientError):
    """NATS cannot be reached right now."""

    error_class = "BROKER_UNAVAILABLE"


# --- settlement -----------------------------------------------------------------------


class FieldError(PayloadInvalid):
    """A field of the event cannot be used; `field` is its path."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class MissingField(FieldError):
    """A field the settlement needs is absent from the event; the message names it."""

    error_class = "MISSING_FIELD"

    def __init__(self, field: str) -> None:
        super().__init__(f"missing field: {field}", field)


class FieldTypeInvalid(FieldError):
    """A field is present but of the wrong type or shape; the message names it."""

    error_class = "FIELD_TYPE_INVALID"

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(f"field {field}: expected {expected}", field)
        self.expected = expected


class InvalidAmount(PermanentError):
    """An amount is zero, negative, or rounds to nothing after conversion."""

    error_class = "INVALID_AMOUNT"


class ProviderAmountInvalid(InvalidAmount):
    """An amount the provider's own minor-unit rules say it never sends (ISK with aurar)."""

    error_class = "PROVIDER_AMOUNT_INVALID"


class UnsupportedPair(PermanentError):
    """The currency-service does not quote this currency pair."""

    error_class = "UNSUPPORTED_PAIR"


class UnknownAccount(PermanentError):
    """A ledger account the transfer refers to does not exist."""

    error_class = "UNKNOWN_ACCOUNT"


class UnknownMerchant(UnknownAccount):
    """The merchant has no ledger account; open one, then reprocess the event."""

    error_class = "UNKNOWN_MERCHANT"


class InsufficientFunds(PermanentError):
    """The transfer would take an account below zero; held for manual review."""

    error_class = "INSUFFICIENT_FUNDS"


class LedgerIdCollision(PermanentError):
    """A transfer or account id already exists with different fields."""

    error_class = "LEDGER_ID_COLLISION"
    critical = True


class LedgerIdAlreadyFailed(PermanentError):
    """The ledger refused this transfer id before and will refuse it forever."""

    error_class = "LEDGER_ID_ALREADY_FAILED"


class LedgerRejected(PermanentError):
    """The ledger refused a transfer as malformed (our bug, not the event's)."""

    error_class = "LEDGER_REJECTED"


class LedgerBatchRaced(TransientError):
    """A transfer id of a batch was committed by someone else after it was looked up;
    the batch rolls back and is posted again (the PostgreSQL ledger handles it itself)."""

    error_class = "LEDGER_BATCH_RACED"


class LedgerImbalance(PermanentError):
    """Total debits differ from total credits: the ledger is inconsistent."""

    error_class = "LEDGER_IMBALANCE"
    critical = True


class RateServiceUnavailable(TransientError):
    """The currency-service did not answer usefully (down, slow, 5xx, bad body)."""

    error_class = "RATE_SERVICE_UNAVAILABLE"


class RateUnavailable(TransientError):
    """No rate: the currency-service is down and no cached rate exists."""

    error_class = "RATE_UNAVAILABLE"


class RateStale(TransientError):
    """The currency-service is down and the cached rate is too old to use."""

    error_class = "RATE_STALE"


class LedgerUnavailable(TransientError):
    """The ledger did not answer in time; the outcome is unknown, retry with the same ids."""

    error_class = "LEDGER_UNAVAILABLE"


class PaymentNotSettled(TransientError):
    """A refund arrived before its payment settled; the payment may still arrive."""

    error_class = "PAYMENT_NOT_SETTLED"


# --- dead-letter replay and operator commands --------------------------------------


class ProviderNotConfigured(PermanentError):
    """The row's provider is no longer in the configuration."""

    error_class = "PROVIDER_NOT_CONFIGURED"


class StillInvalid(PayloadInvalid):
    """The payload still fails validation under the current configuration."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class  # the same class the live path would record


class EventIdChanged(PermanentError):
    """The current configuration reads a different event id from the stored request."""

    error_class = "EVENT_ID_CHANGED"


class EventNotRecorded(PermanentError):
    """No `processed_webhooks` row exists for the event; replay never inserts one."""

    error_class = "EVENT_NOT_RECORDED"


class PayloadRemoved(PermanentError):
    """Retention removed the event's payload (`[retention] payload_max_age_s`): there is
    nothing left to replay or re-publish."""

    error_class = "PAYLOAD_REMOVED"


class UsageError(GatewayError):
    """An operator command's flags or values cannot be used (the command exits 2)."""

    error_class = "USAGE"


class RowNotFound(GatewayError):
    """An id an operator named has no row (the command exits 1)."""

    error_class = "ROW_NOT_FOUND"


class DlqUsageError(UsageError):
    """An operator's flags or values cannot be used; the message says which and why."""

    error_class = "DLQ_USAGE"


class DlqRowNotFound(RowNotFound):
    """An id the operator named has no dead-letter row."""

    error_class = "DLQ_ROW_NOT_FOUND"

    def __init__(self, ids: Sequence[int]) -> None:
        listed = ", ".join(str(i) for i in ids)
        super().__init__(f"no dead-letter row with id {listed}")
        self.ids = tuple(ids)


# --- alerts and the publishing client ------------------------------------------------


class AlertNotDelivered(TransientError):
    """The alert webhook did not answer 2xx; the notice is owed at the next evaluation."""

    error_class = "ALERT_NOT_DELIVERED"


class PublishRejected(GatewayError):
    """The gateway refused the event (4xx); retrying will not help."""

    error_class = "PUBLISH_REJECTED"

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code


class PublishUnavailable(GatewayError):
    """The gateway could not record the event after every retry."""

    error_class = "PUBLISH_UNAVAILABLE"


class SendFailed(GatewayError):
    """`gateway sign --send` got no HTTP answer from the URL."""

    error_class = "SEND_FAILED"


# --- retry control -------------------------------------------------------------------


class RetryScheduled(TransientError):
    """A dependency named its own retry delay (the currency schedule); `cause` says why."""

    def __init__(self, cause: GatewayError, delay_s: float) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.delay_s = delay_s
        self.error_class = cause.error_class


class RetriesExhausted(PermanentError):
    """A transient failure outlasted its retry schedule; `cause` is the last failure."""

    def __init__(self, cause: GatewayError) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.error_class = cause.error_class
        self.critical = cause.critical


# --- backfill from the providers' APIs ------------------------------------------------


class BackfillUsageError(UsageError):
    """A backfill's flags or the provider's API settings cannot be used (exit 2)."""

    error_class = "BACKFILL_USAGE"


class EventsUsageError(UsageError):
    """`gateway events` flags that cannot be used; the message says which and why."""

    error_class = "EVENTS_USAGE"


class EventRowNotFound(RowNotFound):
    """An id the operator named has no `processed_webhooks` row."""

    error_class = "EVENT_ROW_NOT_FOUND"


class ProviderApiAuth(PermanentError):
    """The provider's API refused the credentials (401/403): fix `api_key_env`."""

    error_class = "PROVIDER_API_AUTH"


class ProviderApiRefused(PermanentError):
    """The provider's API refused the request (a 4xx other than 401/403/408/429)."""

    error_class = "PROVIDER_API_REFUSED"


class ProviderApiUnavailable(TransientError):
    """The provider's API kept failing (429, 5xx, no answer) past the run's deadline."""

    error_class = "PROVIDER_API_UNAVAILABLE"


class ProviderApiRedirected(ProviderApiRefused):
    """The provider's API answered a redirect; backfill follows none, so the key stays
    with `api_url`'s host."""

    error_class = "PROVIDER_API_REDIRECTED"


class ProviderApiCertificate(ProviderApiRefused):
    """The API's TLS certificate is not trusted (or names another host)."""

    error_class = "PROVIDER_API_CERTIFICATE"


class ProviderApiAnswerTooLarge(ProviderApiRefused):
    """An API answer grew past `api_max_answer_bytes`; reading stopped at the cap."""

    error_class = "PROVIDER_API_ANSWER_TOO_LARGE"


class ProviderApiAnswerInvalid(ProviderApiRefused):
    """An API answer is not JSON of the listing's shape (a page that is a list, say)."""

    error_class = "PROVIDER_API_ANSWER_INVALID"


class BackfillPageSkipped(PermanentError):
    """A backfill page failed `api_page_attempts` passes in a row; its run was given up."""

    error_class = "BACKFILL_PAGE_SKIPPED"


class BackfillItemInvalid(PayloadInvalid):
    """An entry of a provider's listing cannot be used as listed; it is kept and parked."""

    error_class = "BACKFILL_ITEM_INVALID"


class BackfillItemNotObject(BackfillItemInvalid):
    """A listing's entry is not a JSON object (a string, a number, a list)."""

    error_class = "BACKFILL_ITEM_NOT_OBJECT"


class BackfillItemIdInvalid(BackfillItemInvalid):
    """An entry's id is missing, not a string, too long or holds control characters
    (a NUL); the entry is kept under its body digest."""

    error_class = "BACKFILL_ITEM_ID_INVALID"


class BackfillItemTimeInvalid(BackfillItemInvalid):
    """An entry's time (`created`, `occurred_at`, `delivered_at`) is missing, of the
    wrong type, without a time zone, or unreadable."""

    error_class = "BACKFILL_ITEM_TIME_INVALID"


class BackfillItemUnencodable(BackfillItemInvalid):
    """An entry cannot be serialised as its webhook was (nesting deeper than 254, an
    integer wider than 64 bits); it is kept as the standard JSON encoder writes it."""

    error_class = "BACKFILL_ITEM_UNENCODABLE"


class BackfillItemTooLarge(BackfillItemInvalid):
    """An entry's body exceeds `http.max_body_bytes`, so it can never be published."""

    error_class = "BACKFILL_ITEM_TOO_LARGE"
