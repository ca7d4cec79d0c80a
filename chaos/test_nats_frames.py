"""The NATS-reading fault proxy loses single frames and keeps the framing of the rest:
cut by hand, and in front of a real nats-server (a dropped publish is never stored, a
dropped PubAck leaves its message stored)."""

from __future__ import annotations

import random

import nats
import nats.errors
import pytest

from chaos.nats_frames import FrameDropper, NatsFaultProxy, is_pub_ack, is_stream_publish

PUB = b"HPUB webhooks.stripe.x _INBOX.a.1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
EVENT = b"PUB events.billing.t _INBOX.a.3 2\r\nhi\r\n"
API = b"PUB $JS.API.STREAM.INFO.WEBHOOKS _INBOX.a.2 0\r\n\r\n"
ACK = b'MSG _INBOX.a.1 1 29\r\n{"stream":"WEBHOOKS","seq":7}\r\n'
DATA = b'HMSG _INBOX.b.9 2 12 23\r\nNATS/1.0\r\n\r\n{"id":"e1"}\r\n'
CONTROL = b"PING\r\nPONG\r\n+OK\r\nINFO {}\r\n"


@pytest.mark.parametrize(
    ("pick", "share", "stream", "kept"),
    [
        (is_stream_publish, 1.0, CONTROL + PUB + API + EVENT, CONTROL + API),  # publishes only
        (is_stream_publish, 0.0, CONTROL + PUB + API, CONTROL + PUB + API),  # share 0: nothing
        (is_pub_ack, 1.0, ACK + DATA + CONTROL + ACK, DATA + CONTROL),  # PubAcks, not messages
        (is_pub_ack, 0.0, ACK + DATA, ACK + DATA),
    ],
    ids=["drop-publishes", "keep-publishes", "drop-pubacks", "keep-pubacks"],
)
@pytest.mark.parametrize("chunk", [1, 7, 10_000], ids=lambda n: f"chunks-of-{n}")
def test_frames_are_dropped_whole_whatever_the_chunks(pick, share, stream, kept, chunk):
    """Frames spanning chunks are held until whole; only the picked ones go missing."""
    dropper = FrameDropper(pick, lambda: share, random.Random(1))
    out = b"".join(dropper.feed(stream[i : i + chunk]) for i in range(0, len(stream), chunk))
    assert out == kept


def test_a_share_drops_about_that_share():
    dropper = FrameDropper(is_pub_ack, lambda: 0.05, random.Random(3))
    dropper.feed(ACK * 4000)
    assert dropper.picked == 4000
    assert 150 < dropper.dropped < 250


async def test_in_front_of_a_real_server(nats_node):
    proxy = NatsFaultProxy("127.0.0.1", nats_node.port)
    await proxy.start()
    nc = await nats.connect(f"nats://127.0.0.1:{proxy.listen_port}")
    try:
        js = nc.jetstream(timeout=2)
        await js.add_stream(name="WEBHOOKS", subjects=["webhooks.>"])
        await js.publish("webhooks.a.b", b"1")
        proxy.drop_publishes = 1.0
        with pytest.raises(nats.errors.TimeoutError):
            await js.publish("webhooks.a.b", b"lost on its way", timeout=0.5)
        proxy.drop_publishes, proxy.drop_pubacks = 0.0, 1.0
        with pytest.raises(nats.errors.TimeoutError):
            await js.publish("webhooks.a.b", b"stored, answer lost", timeout=0.5)
        proxy.drop_pubacks = 0.0
        ack = await js.publish("webhooks.a.b", b"4")
        assert ack.seq == 3  # the dropped publish was never stored; the unanswered one was
        assert (await js.get_msg("WEBHOOKS", 2)).data == b"stored, answer lost"
        assert proxy.counts() == {
            "publishes": 4,
            "publishes_dropped": 1,
            "pubacks": 3,
            "pubacks_dropped": 1,
        }
    finally:
        await nc.close()
        await proxy.close()
