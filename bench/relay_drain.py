"""How fast the outbox relay drains a backlog: one message at a time (pipelined) against
atomic batches, on the same machine, in the same sitting.

Each run gets a fresh database with `--rows` recorded rows (transactions of 500) and a
private nats-server (file storage, `sync_interval: always`), then times one relay
sweeping until the cursor has passed every row. Runs alternate between the two modes,
`--repeat` times each; the figures are rows a second, and the ratio of the medians.

    .venv/bin/python -m bench.relay_drain --rows 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import migrate, open_pool
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event
from gateway.ingest.relay import OutboxRelay
from gateway.metrics import Metrics
from gateway.settings import NatsSettings, OutboxSettings
from tests.support.nats import NatsServer
from tests.support.services import create_database, drop_database, stream_messages, unique_name

BODY = b'{"id":"evt","type":"payment_intent.succeeded","data":{"object":{"amount":1999,' + (
    b'"currency":"usd","pad":"' + b"x" * 180 + b'"}}}'
)  # about 300 bytes, as a Stripe payment


async def one_run(rows: int, outbox: OutboxSettings) -> float:
    """Rows a second for one relay draining `rows` recorded rows."""
    name = unique_name("gw_drain")
    dsn = await create_database(name)
    nats = NatsServer()
    try:
        await migrate(dsn)
        nats.start()
        async with open_pool(dsn) as pool:
            async with pool.acquire() as conn:
                for start in range(0, rows, 500):
                    await insert_events(
                        conn,
                        [
                            Event(
                                provider="stripe",
                                event_id=f"evt_{i}",
                                event_type="payment_intent.succeeded",
                                subject="webhooks.stripe.payment_intent.succeeded",
                                headers={},
                                body=BODY,
                                received_at=datetime.now(UTC),
                            )
                            for i in range(start, min(rows, start + 500))
                        ],
                    )
            broker = JetStreamBroker(NatsSettings(url=nats.url))
            await broker.start(wait_s=10)
            try:
                relay = OutboxRelay(pool, broker, outbox, Metrics())
                started = time.perf_counter()
                moved = 0
                while moved < rows:
                    done = await relay.sweep()
                    moved += done.moved
                    if done.stuck:
                        raise RuntimeError("the relay got stuck")
                elapsed_s = time.perf_counter() - started
            finally:
                await broker.close()
        on_stream = len({h["Nats-Msg-Id"] for _, h, _ in await stream_messages(nats.url)})
        if on_stream != rows:
            raise RuntimeError(f"{on_stream} messages on the stream for {rows} rows")
        return rows / elapsed_s
    finally:
        nats.cleanup()
        await drop_database(name)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=OutboxSettings.batch_size)
    parser.add_argument("--publish-batch-max", type=int, default=OutboxSettings.publish_batch_max)
    args = parser.parse_args()
    modes = {
        "pipelined": OutboxSettings(inline=False, batch_size=args.batch_size, publish_batch_max=1),
        "atomic": OutboxSettings(
            inline=False, batch_size=args.batch_size, publish_batch_max=args.publish_batch_max
        ),
    }
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode, outbox in modes.items():
            rate = await one_run(args.rows, outbox)
            rates[mode].append(rate)
            print(f"{mode:>9}: {rate:>9,.0f} rows/s", flush=True)
    medians = {mode: statistics.median(r) for mode, r in rates.items()}
    for mode, r in rates.items():
        print(f"{mode:>9}: median {medians[mode]:,.0f} rows/s (range {min(r):,.0f}-{max(r):,.0f})")
    print(f"atomic / pipelined: {medians['atomic'] / medians['pipelined']:.1f}x")
    print(
        f"rows {args.rows}, batch_size {args.batch_size}, "
        f"publish_batch_max {args.publish_batch_max}"
    )


if __name__ == "__main__":
    asyncio.run(main())
