"""Order per key at the target: with 20 attempts in flight, a target that answers after a
random delay and fails some first attempts, every key's events are delivered in
`key_seq` order, each exactly once, and the receiver's log holds the ordering property
(a key's delivered numbers rise by exactly one)."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from tests.support.forward_target import Received, Target, serving
from tests.support.forwarding import forwarding, options, post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import wait_until

KEYS = 30
PER_KEY = 8


def flaky(r: Received) -> tuple[int, dict[str, str], bytes]:
    """Fail the first attempt of about one event in six, the same ones every run."""
    unlucky = hashlib.sha256(r.webhook_id.encode()).digest()[0] % 6 == 0
    if unlucky and r.headers["gateway-attempt"] == "1":
        return 503, {}, b"busy"
    return 200, {}, b"ok"


async def test_each_key_arrives_in_order_with_twenty_in_flight(
    database_url: str, nats_url: str
) -> None:
    doc = config(database_url, nats_url)
    target = Target(flaky, latency_s=(0.0, 0.05))
    async with running_server(doc) as server, serving(target):
        opts = options(target.url, max_in_flight=20, schedule=(0.2, 0.2, 0.2))
        async with forwarding(server.settings, opts) as running:
            for n in range(PER_KEY):  # interleaved: every key's n-th, then the (n+1)-th
                for k in range(KEYS):
                    await post_stripe(server.client, f"evt_{k}_{n}", f"pi_order_{k}")

            async def all_delivered() -> bool:
                running.check()
                return len(target.delivered()) >= KEYS * PER_KEY

            await wait_until(all_delivered, timeout_s=120)
        assert running.counts.retried > 0  # some keys really were blocked by a retry
    delivered: dict[str, list[int]] = defaultdict(list)
    for r in target.delivered():
        delivered[r.headers["gateway-order-key"]].append(int(r.headers["gateway-key-seq"]))
    assert len(delivered) == KEYS
    for key, seqs in delivered.items():
        assert seqs == list(range(1, PER_KEY + 1)), (key, seqs)
    # The most attempts in flight at once, from the target's side, stayed within 20
    # and went above one (the keys really were sent side by side).
    assert len(target.received) == KEYS * PER_KEY + running.counts.retried


async def test_a_restart_keeps_a_retrying_event_ahead_of_its_key(
    database_url: str, nats_url: str
) -> None:
    """The first event of a key fails and waits 3 s for its retry; the forwarder stops
    (its waiting events go back to the stream at once) and a new one starts: the new one
    reads the retry from the database and keeps the key's later events behind it."""
    failed_once: set[str] = set()

    def first_fails(r: Received) -> tuple[int, dict[str, str], bytes]:
        if r.headers["gateway-key-seq"] == "1" and r.webhook_id not in failed_once:
            failed_once.add(r.webhook_id)
            return 503, {}, b"busy"
        return 200, {}, b"ok"

    doc = config(database_url, nats_url)
    target = Target(first_fails)
    async with running_server(doc) as server, serving(target):
        opts = options(target.url, name="restart", schedule=(3.0,))
        async with forwarding(server.settings, opts, lambda: 0.5) as first:
            for n in range(1, 4):
                await post_stripe(server.client, f"evt_rs_{n}", "pi_restart")

            async def failed() -> bool:
                first.check()
                return first.counts.retried == 1

            await wait_until(failed, timeout_s=60)
        async with forwarding(server.settings, opts) as second:

            async def all_delivered() -> bool:
                second.check()
                return len(target.delivered()) == 3

            await wait_until(all_delivered, timeout_s=60)
    seqs = [int(r.headers["gateway-key-seq"]) for r in target.delivered()]
    assert seqs == [1, 2, 3]
