"""Which stored text is payload: a message that may quote a value of the event's body
(a merchant id, an amount, a payment id) is shown only to roles that may read
payloads; every other role sees that there is one and its length. Pure.

A settlement message names the values it failed on ("merchant acct_9 has no EUR
account", "refund of 1200 EUR is more than ..."); an ingest message can name what the
body held; a forward message quoted the target's answer before that was stopped, and
rows written then are still stored; a replay item's message is the failure of the
stage it replayed. Only the relay's messages (stage `publish`) are the gateway's own
words about NATS, never a value of the body, so they alone stay visible to everyone.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.events.model import Stage

#: Stages whose messages never quote the event: the relay's, about the stream.
_OWN_WORDS = frozenset({Stage.PUBLISH.value})


def message_quotes_payload(stage: str | None) -> bool:
    """Whether a dead letter's message at `stage` may quote the event's body (None: a
    message whose stage is not known, as a replay item's)."""
    return stage not in _OWN_WORDS


@dataclass(frozen=True)
class ShownMessage:
    """A stored message as one role may see it."""

    text: str | None  # None: withheld from this role
    length_chars: int
    withheld: bool


def shown_message(message: str | None, stage: str | None, *, reads_payloads: bool) -> ShownMessage:
    """`message` for a role that reads payloads (`reads_payloads`) or one that does not."""
    text = message or ""
    if reads_payloads or not text or not message_quotes_payload(stage):
        return ShownMessage(message, len(text), False)
    return ShownMessage(None, len(text), True)


def withheld_note(length_chars: int) -> str:
    """What a page says in place of a withheld message."""
    return f"withheld: {length_chars:,} characters that may quote the payload"
