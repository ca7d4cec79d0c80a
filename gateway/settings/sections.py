"""One typed, immutable section per table of the config file.

The retry schedules' defaults are the error policy's own (`core.failures.retry`), so the policy
table is written down once.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.failures.retry import CONSUMER_DEFAULT, CURRENCY, LEDGER
from gateway.settings.values import redacted_repr

#: What the gateway's own NATS headers (`Nats-Msg-Id`, `Gateway-Provider`, `-Event-Id`,
#: `-Event-Type`, `-Received-At`, and `-Source: backfill` (26 bytes) on recovered events,
#: `-Replayed` (~40 bytes) on re-published ones, `traceparent` (68 bytes) while tracing
#: is on, `-Order-Key` and `-Key-Seq` (at most 260 bytes: a key is at most 200) on
#: ordered ones) may take of a message, on top of the body.
#: NATS counts headers against `max_payload`; they are about 235 bytes for usual ids and types, and
#: under 4.5 KiB at the longest ids (255 characters), types (200) and keys the gateway accepts.
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

    #: The address the public listener binds (`0.0.0.0` for every interface).
    host: str = "127.0.0.1"
    #: The public port: webhooks, `/v1/events`, `/healthz` (and `/readyz` and `/metrics`
    #: unless `admin_port` is set).
    #: allowed: at most 65535
    port: int = 8080
    # Every accepted body must be publishable: NATS's 1 MiB less the header budget.
    #: The largest request body accepted; a larger one is answered `413`, checked while
    #: it is read. Every accepted body must be publishable, so this plus the NATS header
    #: budget ({{HEADER_BUDGET_BYTES}} bytes) must fit in `nats.max_payload_bytes` (checked
    #: at start-up).
    #: allowed: at most `nats.max_payload_bytes` - {{HEADER_BUDGET_BYTES}}
    max_body_bytes: int = NATS_DEFAULT_MAX_PAYLOAD_BYTES - HEADER_BUDGET_BYTES
    #: On the ingestion routes, a body not received this long after its head is
    #: refused (`400`).
    request_timeout_s: float = 10.0
    #: The `Retry-After` seconds sent with every JSON `503`.
    retry_after_s: int = 5
    #: The admin listener's address (used only when `admin_port` > 0).
    admin_host: str = "127.0.0.1"
    #: A second listener for `/metrics` and `/readyz`, away from the public port: when
    #: above 0, they are served on `admin_host:admin_port` only. 0 = off, and the public
    #: port serves them.
    #: allowed: at most 65535, and not `port`
    admin_port: int = 0
    # The edge (`gateway.edge`). Request line plus headers, in bytes: the largest
    # header set of 1,076 real deliveries is ~430 bytes (signature aside), so 32 KiB
    # leaves room for proxies' additions and refuses floods (431) early.
    #: The request line and headers together (and a chunked body's chunk-size lines
    #: and trailers); above it the answer is `431` and the connection is closed. Real
    #: deliveries carry well under 1 KiB; 32 KiB leaves room for what proxies add.
    #: allowed: {{MAX_HEADER_BYTES_RANGE[0]}} to {{MAX_HEADER_BYTES_RANGE[1]}}
    max_header_bytes: int = MAX_HEADER_BYTES_DEFAULT
    #: A connection must deliver a complete head this long after it opens, and a
    #: kept-alive connection this long after the first byte of its next request;
    #: otherwise it is answered `408` (or simply closed, if nothing of a request came).
    header_timeout_s: float = 10.0
    #: The whole body must follow its head within this long, on every route; otherwise
    #: `408` and the connection is closed. On the webhook and event routes
    #: `request_timeout_s` is the tighter bound and answers `400` first: keep this above it.
    body_timeout_s: float = 20.0
    #: How long a kept-alive connection may sit idle between requests. Behind a load
    #: balancer that reuses connections, set it above the balancer's own idle timeout.
    keepalive_timeout_s: float = 5.0
    # uvicorn's `limit_concurrency`; each connection also holds a file descriptor.
    #: When open connections or requests in progress reach this, further requests are
    #: answered `503` without reaching the application. `gateway serve` raises its
    #: open-files limit to this + 256 where the hard limit allows. Per worker process.
    max_connections: int = 1000
    #: Connections the kernel queues before the gateway accepts them (capped by
    #: `net.core.somaxconn`).
    backlog: int = 2048


@dataclass(frozen=True)
class IngestSettings:
    """How accepted events are committed (group commit) and queued."""

    #: `true`: group commit, requests arriving together share one INSERT and one commit
    #: (up to `batch_max_rows`, gathered for `batch_window_us`). `false`: one INSERT and
    #: one commit per request (`DirectInbox`), no gathering wait, a fraction of the rate.
    #: Group commit: concurrent requests share one transaction. `false` = one commit per
    #: request.
    batching: bool = True
    #: The most rows in one commit.
    batch_max_rows: int = 64
    #: How long, in microseconds, a group waits for more rows (0 = never waits).
    batch_window_us: int = 500
    # Enough writers that a commit is always being gathered while others wait on
    # PostgreSQL: with 2, the serving process sat idle a fifth of the time under load.
    #: Concurrent group committers.
    writers: int = 4
    #: Events waiting for a commit beyond which requests are answered `503`
    #: (backpressure).
    queue_max: int = 10_000
    #: A request waits at most this long for its commit, then is answered `503`.
    commit_timeout_s: float = 5.0
    #: Repeats of rows this process saw committed are answered `duplicate` without asking
    #: PostgreSQL; about 135 bytes a key. 0 = every repeat asks PostgreSQL.
    remembered_keys: int = 200_000


@dataclass(frozen=True)
class OutboxSettings:
    """How recorded events reach the stream.

    `inline = true`: `gateway serve`'s relay is woken by every commit and publishes rows
    right after it. `inline = false`: `gateway serve` only records, and `gateway relay`
    processes publish every row (so the serving process spends its CPU on acceptance
    alone). Either way the relays share one cursor and one sweeps at a time;
    one not woken by a commit sweeps every `relay_interval_s`.
    """

    #: `true`: `gateway serve`'s relay publishes right after each commit. `false`:
    #: `gateway serve` only records, and `gateway relay` processes publish.
    inline: bool = True
    #: A relay that no commit woke sweeps this often (back to back while there is a
    #: backlog).
    relay_interval_s: float = 1.0
    #: Rows a relay reads and publishes in one sweep (one transaction), in atomic
    #: batches of `publish_batch_max` where the stream takes them. A sweep holds its rows
    #: in memory: lower it where events are large.
    batch_size: int = 1000
    #: Messages in one atomic batch (nats-server 2.12+, stream `allow_atomic`): stored
    #: and synced to disk at once, in order, all or none; each sent once the one before
    #: it is stored.
    #: At most the server's `jetstream.limits.batch.max_msgs` (1000 by default; a larger
    #: batch is refused, then split). `1`: no atomic batches, every message on its own.
    publish_batch_max: int = 500
    #: The most bytes (headers and bodies) in one atomic batch: the server holds a batch
    #: in memory until its last message arrives, up to 50 batches per stream at once.
    publish_batch_max_bytes: int = 4_194_304
    #: How long a publish waits for the stream's acknowledgement.
    publish_timeout_s: float = 5.0
    # A broker outage does not count: nothing is sent while disconnected, and a batch
    # without a single PubAck counts only if the stream answers a request.
    #: Unconfirmed publishes of one row before it is parked in the dead-letter table
    #: (stage `publish`), so it cannot hold the outbox for ever; a broker outage does
    #: not count.
    max_publish_attempts: int = 20
    #: Where `gateway relay` serves `/metrics`.
    relay_metrics_host: str = "127.0.0.1"
    #: `gateway relay`'s `/metrics` port (0 = off; `gateway relay --metrics-port`
    #: overrides it, and a second relay on the same host needs its own).
    #: allowed: at most 65535
    relay_metrics_port: int = 9103


@dataclass(frozen=True)
class NatsSettings:
    """The JetStream connection and stream."""

    #: The NATS server, or several comma-separated for a cluster (`nats://` or `tls://`).
    #: Required: there is no default server.
    #: default: none (required)
    #: allowed: `nats://` or `tls://` URLs
    #: env: `GATEWAY_NATS_URL`
    url: str = ""
    #: The JetStream stream, created by `gateway migrate` when missing. If it exists with
    #: other subjects, retention, storage, duplicate window or replicas, `serve`, `relay` and
    #: `settle` refuse to start naming the differences (`gateway migrate` updates it). One
    #: without `allow_atomic` is accepted and published to one message at a time until
    #: `gateway migrate` adds it.
    stream: str = "WEBHOOKS"
    #: JetStream's de-duplication window for `Nats-Msg-Id`, in seconds.
    duplicate_window_s: int = 120
    #: The stream's replicas: 3 on a JetStream cluster.
    replicas: int = 1
    #: How long a request to the JetStream API waits for its answer.
    request_timeout_s: float = 5.0
    #: The servers' `max_payload`: the largest message (headers and body). A server that
    #: announces less on connect is believed, and larger events are parked.
    max_payload_bytes: int = NATS_DEFAULT_MAX_PAYLOAD_BYTES

    __repr__ = redacted_repr  # `nats://user:password@` or `nats://token@`

    @property
    def servers(self) -> list[str]:
        """The seed servers: `url` may list several, comma-separated, for a cluster."""
        return [u.strip() for u in self.url.split(",") if u.strip()]


@dataclass(frozen=True)
class SettlementSettings:
    """The settlement worker: what it consumes and how it posts."""

    #: The stream subjects `gateway settle` consumes (NATS wildcards allowed). What
    #: settles is decided by each provider's mapping (docs/reference/movements.md), so the default
    #: is everything; an event that moves no money is acknowledged and, for a payment
    #: provider, counted in `gateway_settlement_unmapped_total`.
    subjects: tuple[str, ...] = ("webhooks.>", "events.>")
    #: The ledger currency: every amount is converted to it (with `balances =
    #: "converted"`).
    #: allowed: a three-letter ISO 4217 code
    currency: str = "USD"
    #: How merchants' balances are kept: `converted` into `currency` at the
    #: currency-service's rate, one account per merchant; or `per_currency`, one account
    #: per merchant and currency (open each with `gateway ledger open-account M --currency
    #: C`), every amount in its own currency and nothing converted.
    #: allowed: `converted`, `per_currency`
    balances: str = "converted"
    #: The durable JetStream consumer's name.
    consumer: str = "settlement"
    #: Messages fetched at once, and settled together (one ledger transaction): the
    #: larger the batch, the less each event costs the worker and PostgreSQL (512
    #: against 128 measured about a third less PostgreSQL CPU per event). A fetch
    #: returns what is there, so a quiet stream still settles each event at once.
    batch_size: int = 512
    #: Messages of a batch settled at the same time.
    concurrency: int = 32
    #: Redelivery after a worker died mid-message.
    ack_wait_s: float = 30.0
    #: Where `gateway settle` serves `/metrics`.
    metrics_host: str = "127.0.0.1"
    #: `gateway settle`'s `/metrics` port (0 = off; `gateway settle --metrics-port`
    #: overrides it, and a second worker on the same host needs its own).
    #: allowed: at most 65535
    metrics_port: int = 9102
    #: Seconds before each retry of a transient failure (each with jitter); after the
    #: last, the event goes to the dead-letter table.
    retry_delays_s: tuple[float, ...] = CONSUMER_DEFAULT.delays_s


@dataclass(frozen=True)
class CurrencySettings:
    """The currency-service and how long its rates stay usable from the cache."""

    #: The currency-service: rates are read from `GET {url}/rates/{BASE}/{QUOTE}`.
    url: str = "http://127.0.0.1:8090"
    #: How long a rate cached in Redis stays usable.
    max_age_s: float = 900.0
    #: The deadline of one call to the currency-service.
    timeout_s: float = 2.0
    #: Seconds before each retry when the currency-service fails.
    retry_delays_s: tuple[float, ...] = CURRENCY.delays_s
    #: The prefix of the Redis keys `{prefix}:{BASE}:{QUOTE}`.
    cache_key_prefix: str = "fx"

    __repr__ = redacted_repr  # the URL may carry credentials


@dataclass(frozen=True)
class LedgerSettings:
    """Which ledger backend settles, and how to reach TigerBeetle."""

    #: The ledger that settles: `postgres` (embedded) or `tigerbeetle`.
    #: allowed: `postgres`, `tigerbeetle`
    backend: str = "postgres"
    #: The TigerBeetle cluster id (`tigerbeetle` only).
    cluster_id: int = 0
    #: The TigerBeetle replicas' addresses (`tigerbeetle` only).
    #: env: `TIGERBEETLE_ADDRESS` (comma-separated)
    addresses: tuple[str, ...] = ("127.0.0.1:3000",)
    #: The deadline of every TigerBeetle call.
    timeout_s: float = 5.0
    #: Seconds before each retry when the ledger fails transiently.
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

    #: Bodies and headers are emptied this long after the event arrived (0 = kept for
    #: ever).
    payload_max_age_s: float = 30 * 86_400.0
    #: Rows, and with them the de-duplication keys, are deleted this long after the
    #: event arrived (0 = kept for ever). A provider retry that arrives after its key is
    #: gone is processed again, so make it longer than every provider retries
    #: (Stripe: three days).
    #: allowed: 0, or at least `payload_max_age_s`
    key_max_age_s: float = 0.0
    # At most batch_size / pause_s rows a second (1,000): emptying a payload costs the
    # database about as much as recording an event, and on a busy machine 10,000 a
    # second showed in ingestion's p99 (docs/performance.md).
    #: Rows per short transaction.
    batch_size: int = 500
    #: Sleep between batches, so ingestion keeps the database first: with the defaults
    #: at most 1,000 rows a second.
    pause_s: float = 0.5
    #: How often `gateway serve` runs a pass.
    interval_s: float = 300.0
    #: `false`: only `gateway retention run` (from cron, say) removes anything.
    background: bool = True


@dataclass(frozen=True)
class TracingSettings:
    """`[tracing]`: OpenTelemetry traces over OTLP/HTTP (`gateway.tracing`).

    Off while `endpoint` is empty (the default); `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
    URL) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full `/v1/traces` URL) turn it on
    too, and `OTEL_SDK_DISABLED=true` keeps it off.
    """

    #: The OTLP/HTTP collector: spans go to `{endpoint}/v1/traces` (or to the endpoint
    #: as given when it already ends in `/v1/traces`). Empty = tracing off.
    #: allowed: an `http://` or `https://` URL, or empty
    #: env: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
    #:     `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL); `OTEL_SDK_DISABLED=true` turns
    #:     tracing off
    endpoint: str = ""
    #: The share of new traces recorded, decided before any span is made; an event's
    #: decision is followed by relay and settle, and a sampled parent is always followed.
    #: allowed: 0 to 1
    #: env: `OTEL_TRACES_SAMPLER_ARG`
    sample_ratio: float = 1.0
    #: The service name on every span; empty = the process's own (`gateway-serve`,
    #: `gateway-relay`, `gateway-settle`).
    #: env: `OTEL_SERVICE_NAME`
    service_name: str = ""
    #: `true`: a verified sender's `traceparent` header is the parent of the gateway's
    #: spans (a trusted sender that traces into the same backend). `false`: a span link,
    #: never the parent.
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
