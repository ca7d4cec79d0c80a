"""A provider the confirm stage fetches for (`ConfirmSource`), and what its inquiry
says of a payment whose fetch ran out of time (`standing`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from gateway.adapters.provider_api.http_json import RawAnswer
from gateway.core.confirm.events import Shaping
from gateway.core.providers.base import Confirmation, Decode, ReadAnswer
from gateway.settings.provider_api import ProviderApi


@dataclass(frozen=True)
class ConfirmSource:
    """One configured provider whose webhooks are confirmed, and its API."""

    confirmation: Confirmation
    api: ProviderApi
    shaping: Shaping  # `shaping.provider` is the configured name
    document: Decode | None = None  # how its request's body is read; None: JSON
    #: Its webhook secrets, for a provider that signs API requests or answers with them.
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def read_answer(self) -> ReadAnswer:
        """How its answers are read: with its secrets, when they are signed (iyzico)."""
        keyed = self.confirmation.keyed
        return self.confirmation.confirmed if keyed is None else keyed(self.secrets)


def standing(confirmation: Confirmation, answer: RawAnswer) -> str:
    """Where a payment stands, in words, from the answer to its provider's inquiry
    (Zarinpal's `inquiry.json`, asked once, never taken for a fetch); an answer that
    was not read, or cannot be, is said as such."""
    if confirmation.inquiry_status is None:
        return "not asked"
    if answer.value is None:
        return f"no answer ({answer.status or answer.detail})"
    try:
        return confirmation.inquiry_status(orjson.loads(answer.value[0]))
    except orjson.JSONDecodeError:
        return "an answer that is not JSON"
