"""The atomic publisher's frames are what nats-py's `publish` would send, byte for byte:
the same `Nats-Msg-Id` whichever path published a row, so the duplicate window matches."""

from __future__ import annotations

import nats.errors
import pytest
from nats.aio.client import Client

from gateway.adapters.jetstream.wire import encode, frame


async def nats_py_frame(subject: str, reply: str, headers: dict[str, str], body: bytes) -> bytes:
    """What nats-py's own publish path puts in its outgoing buffer."""
    nc = Client()
    sent: list[bytes] = []

    async def capture(cmd: bytes, priority: bool = False) -> None:
        sent.append(cmd)

    nc._send_command = capture  # type: ignore[method-assign]
    nc._flush_queue = None
    await nc._send_publish(subject, reply, body, len(body), headers)
    (only,) = sent
    return only


@pytest.mark.parametrize(
    ("headers", "extra", "reply"),
    [
        ({"Nats-Msg-Id": "stripe:evt_1", "Gateway-Provider": "stripe"}, {}, ""),
        (
            {"Nats-Msg-Id": "stripe:evt_1", "Gateway-Event-Type": "charge.é"},
            {"Nats-Batch-Id": "abc-1", "Nats-Batch-Sequence": "3", "Nats-Batch-Commit": "1"},
            "_INBOX.x.0_3",
        ),
        # Values are trimmed and CR/LF become spaces, as nats-py does: an id with a line
        # break in it is the same id on both paths.
        ({"Nats-Msg-Id": " p:a\r\nb ", "Gateway-Event-Id": "x\ny"}, {"Nats-Batch-Id": "b"}, ""),
        ({" Padded ": "v", "": "skipped"}, {}, ""),
    ],
)
async def test_a_frame_is_what_nats_py_would_send(
    headers: dict[str, str], extra: dict[str, str], reply: str
) -> None:
    body = b'{"id": "evt_1"}'
    expected = await nats_py_frame("webhooks.stripe.x", reply, {**headers, **extra}, body)
    assert frame(encode("webhooks.stripe.x", headers, body), extra, reply) == expected


@pytest.mark.parametrize("subject", ["", "a b", "a\r\nPUB x 1", "a\tb"])
def test_a_subject_nats_py_refuses_is_refused(subject: str) -> None:
    with pytest.raises(nats.errors.BadSubjectError):
        encode(subject, {}, b"")


def test_a_header_key_nats_py_refuses_is_refused() -> None:
    with pytest.raises(nats.errors.BadHeaderError):
        encode("a.b", {"Bad Key": "v"}, b"")
