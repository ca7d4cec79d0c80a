"""Which stored messages are payload: a viewer sees a dead letter's message only where
its stage never quotes the event (the relay's `publish`); elsewhere its length."""

from __future__ import annotations

import pytest

from gateway.core.payload_text import ShownMessage, message_quotes_payload, shown_message

MESSAGE = "merchant acct_9 has no EUR account"


@pytest.mark.parametrize(
    ("stage", "quotes"),
    [
        ("settlement", True),  # names the merchant, the amount, the payment
        ("ingest", True),  # names what the body held
        ("forward:billing", True),  # rows stored before answers stopped being quoted
        (None, True),  # a replay item's message: the stage is not known
        ("some-future-stage", True),  # unknown: withheld, never shown by default
        ("publish", False),  # the relay's own words about NATS
    ],
)
def test_which_stages_quote_the_payload(stage: str | None, quotes: bool) -> None:
    """Only the relay's messages are known never to carry a value of the body."""
    assert message_quotes_payload(stage) is quotes


@pytest.mark.parametrize(
    ("message", "stage", "reads", "shown"),
    [
        (MESSAGE, "settlement", False, ShownMessage(None, len(MESSAGE), True)),
        (MESSAGE, "settlement", True, ShownMessage(MESSAGE, len(MESSAGE), False)),
        (MESSAGE, "publish", False, ShownMessage(MESSAGE, len(MESSAGE), False)),
        ("", "settlement", False, ShownMessage("", 0, False)),  # nothing to withhold
        (None, "settlement", False, ShownMessage(None, 0, False)),
    ],
)
def test_a_message_as_each_role_sees_it(
    message: str | None, stage: str, reads: bool, shown: ShownMessage
) -> None:
    """A role without payloads gets the length and the mark, never the text."""
    assert shown_message(message, stage, reads_payloads=reads) == shown
