"""One typed, immutable section per table of the config file.

The retry schedules' defaults are the error policy's own (`core.retry`), so the policy
table is written down once.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.retry import CONSUMER_DEFAULT, CURRENCY, LEDGER
from gateway.settings.values import redacted_repr

#: What the gateway's own NATS headers (`Nats-Msg-Id`, `Gateway-Provider`, `-Event-Id`,
#: `-Event-Type`, `-Received-At`, and `-Source: backfill` (26 bytes) on recovered events,
#: `-Replayed` (~40 bytes) on re-published ones, `traceparent` (68 bytes) while tracing
#: is on) may take of a message, on top of the body.
#: NATS counts headers against `max_payload`; they are about 235 bytes for usual ids and types, and
#: under 4 KiB at the longest ids (255 characters) and types (200) the gateway accepts.
#: An event whose headers still do not fit is parked (`PAYLOAD_TOO_LARGE`) by the
#: publisher rather than sent.
HEADER_BUDGET_BYTES = 8192
#: Bounds of `http.max_header_bytes`: below 4 KiB real deliveries behind a proxy could be
#: refused; above 1 MiB the limit no longer protects anything.
MAX_HEADER_BYTES_DEFAULT = 32_768
MAX_HEADER_BYTES_RANGE = (4_096, 1_048_576)
#: NATS's own default `max_payload`.
NATS_DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576


@dataclass(frozen=True)
class HttpSettings:
    """The receiver's listening address and request limits."""

    host: str = "127.0.0.1"
    port: int = 8080
    # Every accepted body must be publishable: NATS's 1 MiB less the header budget.
    max_body_bytes: int = NATS_DEFAULT_MAX_PAYLOAD_BYTES - HEADER_BUDGET_BYTES
    request_timeout_s: float = 10.0
    retry_after_s: int = 5
    # A second listener for /metrics and /readyz, away from the public port;
    # 0 = off, and the public port serves them.
    admin_host: str = "127.0.0.1"
    admin_port: int = 0
    # The edge (`gateway.ingest.edge`). Request line plus headers, in bytes: the largest
    # header set of 1,076 real deliveries is ~430 bytes (signature aside), so 32 KiB
    # leaves room for proxies' additions and refuses floods (431) early.
    max_header_bytes: int = MAX_HEADER_BYTES_DEFAULT
    # The whole head must arrive this long after the connection opens, or after the
    # first byte of a later request on a kept-alive connection (408, or a plain close
    # when nothing was sent), so idle sockets cannot pile up.
    header_timeout_s: float = 10.0
    # The whole body must follow its head within this long, on every route (408, or a
    # close once answered). Above `request_timeout_s`, so on the ingestion routes that
    # deadline's 400 comes first; this one bounds everything else.
    body_timeout_s: float = 20.0
    # A kept-alive connection with no new request is closed after this long (uvicorn's
    # `timeout_keep_alive`); behind a proxy, keep it above the proxy's own idle timeout.
    keepalive_timeout_s: float = 5.0
    # Connections plus in-flight requests above which requests are answered 503
    # (uvicorn's `limit_concurrency`); each connection also holds a file descriptor.
    max_connections: int = 1000
    backlog: int = 2048  # the listening socket's accept queue (the kernel caps it)


@dataclass(frozen=True)
class IngestSettings:
    """How accepted events are committed (group commit) and queued."""

    #: `true`: group commit, requests arriving together share one INSERT and one commit
    #: (up to `batch_max_rows`, gathered for `batch_window_us`). `false`: one INSERT and
    #: one commit per request (`DirectInbox`), no gathering wait, a fraction of the rate.
    batching: bool = True
    batch_max_rows: int = 64
    batch_window_us: int = 500
    # Enough writers that a commit is always being gathered while others wait on
    # PostgreSQL: with 2, the serving process sat idle a fifth of the time under load.
    writers: int = 4
    queue_max: int = 10_000
    commit_timeout_s: float = 5.0
    # Keys whose rows this process saw committed, so a repeat is answered without a
    # round trip (`gateway.ingest.remembered_keys`); about 135 bytes each; 0 = every
    # repeat asks PostgreSQL.
    remembered_keys: int = 200_000


@dataclass(frozen=True)
class OutboxSettings:
    """How recorded events reach the stream.

    `inline = true`: `gateway serve`'s relay is woken by every commit and publishes rows
    right after it. `inline = false`: `gateway serve` only records, and `gateway relay`
    processes publish every row (so the serving process spends its CPU on acceptance
    alone). Either way the relays share one cursor (sql/010) and one sweeps at a time;
    one not woken by a commit sweeps every `relay_interval_s`.
    """

    inline: bool = True
    relay_interval_s: float = 1.0
    batch_size: int = 256
    publish_timeout_s: float = 5.0
    # Unconfirmed publishes of one row before it is parked (`dlq_webhooks`, stage
    # `publish`) so it cannot hold the outbox for ever; a broker outage does not count
    # (nothing is sent while disconnected, and a batch without a single PubAck counts
    # only if the stream answers a request).
    max_publish_attempts: int = 20
    # `gateway relay` serves /metrics here (0 = off); a second relay on the same host
    # needs another port (`gateway relay --metrics-port`).
    relay_metrics_host: str = "127.0.0.1"
    relay_metrics_port: int = 9103


@dataclass(frozen=True)
class NatsSettings:
    """The JetStream connection and stream."""

    url: str = ""  # no default server: `[nats] url` or GATEWAY_NATS_URL (required)
    stream: str = "WEBHOOKS"
    duplicate_window_s: int = 120
    replicas: int = 1
    request_timeout_s: float = 5.0
    # The largest message (headers + body) the servers take: their `max_payload`.
    # `http.max_body_bytes` plus the header budget must fit in it (checked at start-up);
    # a server that announces less on connect is believed, and larger events are parked.
    max_payload_bytes: int = NATS_DEFAULT_MAX_PAYLOAD_BYTES

    __repr__ = redacted_repr  # `nats://user:password@` or `nats://token@`

    @property
    def servers(self) -> list[str]:
        """The seed servers: `url` may list several, comma-separated, for a cluster."""
        return [u.strip() for u in self.url.split(",") if u.strip()]


@dataclass(frozen=True)
class SettlementSettings:
    """The settlement worker: what it consumes and how it posts."""

    subjects: tuple[str, ...] = (
        "webhooks.*.payment_intent.succeeded",
        "webhooks.*.charge.refunded",
        "events.*.payment.captured",
        "events.*.payment.refunded",
    )
    currency: str = "USD"  # the ledger currency every amount is converted to
    consumer: str = "settlement"  # the durable JetStream consumer's name
    batch_size: int = 128  # messages fetched at once
    concurrency: int = 32  # messages of a batch settled one by one at the same time
    ack_wait_s: float = 30.0  # redelivery after a worker died mid-message
    # `gateway settle` serves /metrics here (0 = off); a second worker on the same host
    # needs another port (`gateway settle --metrics-port`).
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9102
    retry_delays_s: tuple[float, ...] = CONSUMER_DEFAULT.delays_s


@dataclass(frozen=True)
class CurrencySettings:
    """The currency-service and how long its rates stay usable from the cache."""

    url: str = "http://127.0.0.1:8090"
    max_age_s: float = 900.0
    timeout_s: float = 2.0
    retry_delays_s: tuple[float, ...] = CURRENCY.delays_s
    cache_key_prefix: str = "fx"  # Redis keys `{prefix}:{BASE}:{QUOTE}`

    __repr__ = redacted_repr  # the URL may carry credentials


@dataclass(frozen=True)
class LedgerSettings:
    """Which ledger backend settles, and how to reach TigerBeetle."""

    backend: str = "postgres"  # postgres | tigerbeetle
    cluster_id: int = 0
    addresses: tuple[str, ...] = ("127.0.0.1:3000",)
    timeout_s: float = 5.0
    retry_delays_s: tuple[float, ...] = LEDGER.delays_s


#: Stripe retries a failed delivery for up to three days: the shortest key horizon a
#: Stripe endpoint can afford. Shorter horizons are allowed (tests use seconds) and
#: warned about at start-up.
RETRY_HORIZON_S = 3 * 86_400.0


@dataclass(frozen=True)
class RetentionSettings:
    """`[retention]`: how long payloads and dedup keys are kept, and how removal is paced.

    A payload (body and headers) is emptied `payload_max_age_s` after the event arrived;
    the row, with its key, stays until `key_max_age_s` (0 = for ever). A provider retry
    that arrives after its key is gone is accepted as new and processed again, so the key
    horizon must exceed every provider's retry schedule.
    """

    payload_max_age_s: float = 30 * 86_400.0  # 0 = payloads kept for ever
    key_max_age_s: float = 0.0  # 0 = keys kept for ever
    # At most batch_size / pause_s rows a second (1,000): emptying a payload costs the
    # database about as much as recording an event, and on a busy machine 10,000 a
    # second showed in ingestion's p99 (README, Storage and retention).
    batch_size: int = 500  # rows per short transaction
    pause_s: float = 0.5  # between batches, so ingestion keeps the database first
    interval_s: float = 300.0  # how often `gateway serve` runs a pass
    background: bool = True  # false: only `gateway retention run` (cron) removes


@dataclass(frozen=True)
class TracingSettings:
    """`[tracing]`: OpenTelemetry traces over OTLP/HTTP (`gateway.tracing`).

    Off while `endpoint` is empty (the default); `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
    URL) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full `/v1/traces` URL) turn it on
    too, and `OTEL_SDK_DISABLED=true` keeps it off.
    """

    endpoint: str = ""  # "http://HOST:4318": spans go to {endpoint}/v1/traces
    sample_ratio: float = 1.0  # of new traces; a sampled parent is always followed
    service_name: str = ""  # "" = the process's own (gateway-serve, -relay, -settle)
    # A provider's own `traceparent` header is a span link, never the parent, unless
    # this is true (a trusted sender that traces into the same backend).
    trust_incoming: bool = False

    __repr__ = redacted_repr  # the endpoint may carry credentials

    @property
    def enabled(self) -> bool:
        return bool(self.endpoint)

    @property
    def traces_url(self) -> str:
        """Where the exporter POSTs: the endpoint as given when it already names the
        traces path, else `{endpoint}/v1/traces` (OTLP/HTTP's rule for a base URL)."""
        if self.endpoint.rstrip("/").endswith("/v1/traces"):
            return self.endpoint
        return self.endpoint.rstrip("/") + "/v1/traces"
