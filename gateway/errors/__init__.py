"""The gateway's one exception tree, and the codes it stores.

Two roots carry the retry decision: anything under `TransientError` may succeed if
tried again later; anything under `PermanentError` never will, so it goes straight to
the dead-letter table. Classification is an `isinstance` check, never a look at the
message text. Adapters translate their library's errors into these with `raise ... from`.

Every class carries an `ErrorClass` member, the stable code stored in
`dlq_webhooks.error_class`; an exception outside the tree is stored as
`ErrorClass.UNEXPECTED_ERROR` (`error_class_of`). One module per family:

- `codes`: `ErrorClass` and its `Family`, the vocabulary itself;
- `base`: the roots and the retry wrappers;
- `request`: requests refused before anything is stored (4xx);
- `startup`: configuration and installation problems that stop a process;
- `pipeline`: a verified event's body, PostgreSQL and NATS;
- `settlement`: fields, amounts, currencies and the ledger;
- `replay`: why a dead letter's stage cannot run again;
- `commands`: operator commands' flags and ids;
- `backfill`: the providers' APIs;
- `outbound`: the alert webhook, the publishing client and `gateway sign --send`.
"""

from gateway.errors.backfill import (
    ProviderApiAnswerInvalid,
    ProviderApiAnswerTooLarge,
    ProviderApiAuth,
    ProviderApiCertificate,
    ProviderApiRedirected,
    ProviderApiRefused,
    ProviderApiUnavailable,
)
from gateway.errors.base import (
    GatewayError,
    PermanentError,
    RetriesExhausted,
    RetryScheduled,
    TransientError,
    error_class_of,
)
from gateway.errors.codes import ErrorClass, Family
from gateway.errors.commands import (
    BackfillUsageError,
    DlqRowNotFound,
    DlqUsageError,
    EventRowNotFound,
    EventsUsageError,
    ForwardUsageError,
    OrderingUsageError,
    OrderKeyNotFound,
    RowNotFound,
    UsageError,
)
from gateway.errors.outbound import (
    AlertNotDelivered,
    ForwardAttemptsExhausted,
    ForwardRefused,
    PublishRejected,
    PublishUnavailable,
    SendFailed,
)
from gateway.errors.pipeline import (
    BrokerUnavailable,
    ConfirmationMismatch,
    DatabaseError,
    DatabaseUnavailable,
    Overloaded,
    PayloadInvalid,
    PayloadNotJson,
    PayloadTooLarge,
    PublishAttemptsExhausted,
    SigningCertificateUnavailable,
    StreamMessageUnreadable,
)
from gateway.errors.replay import (
    EventIdChanged,
    EventNotRecorded,
    PayloadRemoved,
    ProviderNotConfigured,
    StillInvalid,
)
from gateway.errors.request import (
    BadRequest,
    BatchTooLarge,
    BodyTooLarge,
    ClientGone,
    EventIdMissing,
    Forbidden,
    RequestRejected,
    SignatureError,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
    SigningCertificateRefused,
    TimestampOutOfWindow,
    Unauthorized,
    UnknownProvider,
)
from gateway.errors.settlement import (
    BlockedByPredecessor,
    EventNotMapped,
    ExceedsPayment,
    FieldError,
    FieldTypeInvalid,
    InsufficientFunds,
    InvalidAmount,
    LedgerBatchRaced,
    LedgerIdAlreadyFailed,
    LedgerIdCollision,
    LedgerImbalance,
    LedgerRejected,
    LedgerUnavailable,
    MissingField,
    OrderPredecessorMissing,
    PaymentMismatch,
    PaymentNotSettled,
    ProviderAmountInvalid,
    RateServiceUnavailable,
    RateStale,
    RateUnavailable,
    UnknownAccount,
    UnknownMerchant,
    UnsupportedPair,
)
from gateway.errors.startup import (
    ConfigError,
    DatabaseNotDurable,
    MigrationsMissing,
    OutboxCursorAhead,
    StreamMismatch,
    StreamUpdateRefused,
)

__all__ = [
    "AlertNotDelivered",
    "BackfillUsageError",
    "BadRequest",
    "BatchTooLarge",
    "BlockedByPredecessor",
    "BodyTooLarge",
    "BrokerUnavailable",
    "ClientGone",
    "ConfigError",
    "ConfirmationMismatch",
    "DatabaseError",
    "DatabaseNotDurable",
    "DatabaseUnavailable",
    "DlqRowNotFound",
    "DlqUsageError",
    "ErrorClass",
    "EventIdChanged",
    "EventIdMissing",
    "EventNotMapped",
    "EventNotRecorded",
    "EventRowNotFound",
    "EventsUsageError",
    "ExceedsPayment",
    "Family",
    "FieldError",
    "FieldTypeInvalid",
    "Forbidden",
    "ForwardAttemptsExhausted",
    "ForwardRefused",
    "ForwardUsageError",
    "GatewayError",
    "InsufficientFunds",
    "InvalidAmount",
    "LedgerBatchRaced",
    "LedgerIdAlreadyFailed",
    "LedgerIdCollision",
    "LedgerImbalance",
    "LedgerRejected",
    "LedgerUnavailable",
    "MigrationsMissing",
    "MissingField",
    "OrderKeyNotFound",
    "OrderPredecessorMissing",
    "OrderingUsageError",
    "OutboxCursorAhead",
    "Overloaded",
    "PayloadInvalid",
    "PayloadNotJson",
    "PayloadRemoved",
    "PayloadTooLarge",
    "PaymentMismatch",
    "PaymentNotSettled",
    "PermanentError",
    "ProviderAmountInvalid",
    "ProviderApiAnswerInvalid",
    "ProviderApiAnswerTooLarge",
    "ProviderApiAuth",
    "ProviderApiCertificate",
    "ProviderApiRedirected",
    "ProviderApiRefused",
    "ProviderApiUnavailable",
    "ProviderNotConfigured",
    "PublishAttemptsExhausted",
    "PublishRejected",
    "PublishUnavailable",
    "RateServiceUnavailable",
    "RateStale",
    "RateUnavailable",
    "RequestRejected",
    "RetriesExhausted",
    "RetryScheduled",
    "RowNotFound",
    "SendFailed",
    "SignatureError",
    "SignatureMalformed",
    "SignatureMismatch",
    "SignatureMissing",
    "SigningCertificateRefused",
    "SigningCertificateUnavailable",
    "StillInvalid",
    "StreamMessageUnreadable",
    "StreamMismatch",
    "StreamUpdateRefused",
    "TimestampOutOfWindow",
    "TransientError",
    "Unauthorized",
    "UnknownAccount",
    "UnknownMerchant",
    "UnknownProvider",
    "UnsupportedPair",
    "UsageError",
    "error_class_of",
]
