"""Atomic batches written to the connection as protocol frames, not one `publish` each.

nats-py's `publish` costs about 45 µs a message with six headers: it checks every
header key against a regular expression and rebuilds the header block per message.
For a batch of 1,000 that was most of the relay's CPU. Here a row's header lines are
encoded (and checked) once, each message of a batch is one `HPUB` frame that adds only
the batch headers, and the frames go into nats-py's outgoing buffer with one flush per
batch.

The frames are what nats-py would send, byte for byte (a test compares them): the same
checks (no whitespace in a subject, header keys as RFC 7230 tokens), the same cleaning
of values (trimmed, CR and LF turned into spaces), so a `Nats-Msg-Id` is the same
whichever path published it and the duplicate window matches it.

It relies on two of nats-py's internals, `_send_command` and `_flush_pending`; a client
without them gets the frames' messages through `publish` instead (`Frames.raw`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nats.errors
from nats.aio.client import Client

# nats-py's own rules (nats/aio/client.py), repeated: a frame must be what it would send.
_SUBJECT_INVALID = re.compile(r"[ \t\r\n]")
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_HEADER_START = b"NATS/1.0\r\n"


@dataclass(frozen=True)
class Encoded:
    """A row's message with its header lines encoded once: sent in any batch by adding
    the batch's own lines (`frame`)."""

    subject: str
    lines: bytes  # `Key: value\r\n` for each of the row's headers
    body: bytes
    headers: dict[str, str]  # as given, for a client without the internals


def encode(subject: str, headers: dict[str, str], body: bytes) -> Encoded:
    """Check and encode a message as nats-py would; `BadSubjectError` or
    `BadHeaderError` for what it would refuse."""
    if not subject or _SUBJECT_INVALID.search(subject):
        raise nats.errors.BadSubjectError
    return Encoded(subject, header_lines(headers), body, headers)


#: Header names already checked: a row's headers are the same few names every time, and
#: checking each against the pattern was a third of the encoding's cost.
_CHECKED_KEYS: set[str] = set()
_CHECKED_KEYS_MAX = 256


def header_lines(headers: dict[str, str]) -> bytes:
    """The header block's lines (without the `NATS/1.0` line and the blank one)."""
    lines: list[str] = []
    for key, value in headers.items():
        if key not in _CHECKED_KEYS:
            name = key.strip()
            if not name:
                continue  # nats-py skips an empty key
            if not _HEADER_KEY.fullmatch(name):
                raise nats.errors.BadHeaderError(name)
            if name != key or len(_CHECKED_KEYS) >= _CHECKED_KEYS_MAX:
                key = name  # not remembered: it still needs its strip
            else:
                _CHECKED_KEYS.add(key)
        value = value.strip()
        if "\r" in value or "\n" in value:
            value = value.translate(_VALUE_NEWLINES)
        lines.append(f"{key}: {value}\r\n")
    return "".join(lines).encode()


def _own_lines(headers: dict[str, str]) -> bytes:
    """Lines of the batch's own headers: fixed names, values of digits and a nuid, so
    there is nothing to check or clean."""
    return "".join([f"{key}: {value}\r\n" for key, value in headers.items()]).encode()


def frame(message: Encoded, extra: dict[str, str], reply: str) -> bytes:
    """The `HPUB` frame of `message` with the `extra` headers (the batch's own) after its
    own."""
    header = _HEADER_START + message.lines + _own_lines(extra) + b"\r\n"
    total = len(header) + len(message.body)
    control = f"HPUB {message.subject} {reply} {len(header)} {total}\r\n".encode()
    return control + header + message.body + b"\r\n"


class Frames:
    """Writes a batch's messages to a client: frames into its buffer, one flush."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self.raw = hasattr(nc, "_send_command") and hasattr(nc, "_flush_pending")

    async def send(self, messages: list[tuple[Encoded, dict[str, str], str]]) -> None:
        """Send (message, extra headers, reply) in order; raises the library's errors
        (a closed or disconnected client) as `publish` would."""
        nc = self._nc
        if not self.raw:
            for message, extra, reply in messages:
                headers = {**message.headers, **extra}
                await nc.publish(message.subject, message.body, reply=reply, headers=headers)
            return
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        if not nc.is_connected:  # reconnecting: leave the batch for the next sweep
            raise nats.errors.OutboundBufferLimitError
        for message, extra, reply in messages:
            await nc._send_command(frame(message, extra, reply))  # internals: see the docstring
        await nc._flush_pending()
