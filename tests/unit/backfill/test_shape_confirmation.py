"""A backfilled event of a provider whose webhooks are confirmed by a fetch is shaped as
the live path shapes its webhook: a GoCardless money event, with an API key, waits for
the confirm stage (no subject, no key, its fetch owed); any other event is published as
it came. Without the key nothing waits (the provider takes its events as they come)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.adapters.provider_api import Fetched, Listed
from gateway.adapters.provider_api.gocardless_events import listed_event
from gateway.backfill.shape import shape
from gateway.core.events.model import Source
from gateway.settings.senders import ProviderSettings, parse_provider

NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
KEYS = {"api_key_env": "GC_TOKEN"}


def gocardless(*, with_key: bool, **more: object) -> ProviderSettings:
    data = {"scheme": "gocardless", "secrets": ["s"], **(KEYS if with_key else {}), **more}
    return parse_provider("gocardless", data, {"GC_TOKEN": "sandbox_x"})


def listed(resource: str, action: str) -> tuple[Listed, Fetched]:
    event = {"id": "EV000000000001", "created_at": "2026-12-06T10:00:00.000Z",
             "resource_type": resource, "action": action, "links": {"payment": "PM0001"},
             "details": {}, "metadata": {}}  # fmt: skip
    item = listed_event(event)
    assert not isinstance(item, str)
    return item, Fetched(item.headers, item.body)


@pytest.mark.parametrize(
    ("resource", "action", "waits"),
    [
        ("payments", "confirmed", True),
        ("payments", "charged_back", True),
        ("refunds", "created", True),
        ("payouts", "paid", True),
        ("mandates", "created", False),
        ("payments", "created", False),  # a payment's change that moves no money
    ],
)
def test_with_a_key_money_events_wait_for_their_fetch(
    resource: str, action: str, waits: bool
) -> None:
    item, fetched = listed(resource, action)
    event = shape(gocardless(with_key=True), item, fetched, NOW, 1_000_000).event
    assert event.source == Source.BACKFILL and event.failure is None
    assert (event.event_id, event.event_type) == ("EV000000000001", f"{resource}.{action}")
    assert event.awaits_confirmation is waits
    expected = None if waits else f"webhooks.gocardless.{resource}.{action}"
    assert event.subject == expected
    assert orjson.loads(event.body)["events"][0]["id"] == "EV000000000001"


def test_a_waiting_event_has_no_ordering_key() -> None:
    """As live: the confirmed copy carries the key (`payment_id`), not the event waiting."""
    item, fetched = listed("payments", "confirmed")
    provider = gocardless(with_key=True)

    def every_subject(subject: str) -> bool:
        return True

    event = shape(provider, item, fetched, NOW, 1_000_000, every_subject).event
    assert event.awaits_confirmation and event.order_key is None


def test_a_parked_money_event_is_parked_not_waiting() -> None:
    """An event refused by the `event_types` list is parked as any other, owing nothing."""
    item, fetched = listed("payments", "confirmed")
    provider = gocardless(with_key=True, event_types=["mandates.*"])
    event = shape(provider, item, fetched, NOW, 1_000_000).event
    assert event.failure is not None and not event.awaits_confirmation


def test_without_a_key_nothing_waits() -> None:
    """Shaping reads `ProviderSettings.confirmation`, None without `api_key_env`."""
    item, fetched = listed("payments", "confirmed")
    provider = gocardless(with_key=False)
    assert provider.confirmation is None
    event = shape(provider, item, fetched, NOW, 1_000_000).event
    assert not event.awaits_confirmation
    assert event.subject == "webhooks.gocardless.payments.confirmed"
