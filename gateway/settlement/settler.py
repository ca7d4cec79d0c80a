"""Settling events: extract the instruction, fix the rate, post the transfer once.

One algorithm (`Settler.settle_items`, over the steps of `gateway.settlement.steps`)
for a fetched batch and for one event, which is a batch of one (`Settler.settle`). Used
by the JetStream worker and by DLQ replay alike, so a replayed event goes through
exactly the same idempotency as a live one: the transfer id is derived from the
settlement, the ledger answers EXISTS to a repeat, and the amount and rate are fixed by
the first attempt.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal

from gateway import tracing
from gateway.adapters.currency import RateSource
from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import settlements as store
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.core.currency import Rate, RateAction
from gateway.core.events.model import Event
from gateway.core.failures.excerpt import excerpt
from gateway.core.ledger.accounts import clearing_name
from gateway.core.ledger.ids import FX_OWNER, fees_owner, merchant_account_id, payouts_owner
from gateway.core.ledger.port import Ledger
from gateway.core.ordering.keys import KeyRule
from gateway.core.providers.movements import instruction_of, movements_of
from gateway.core.settlement.instructions import SettlementInstruction, SettlementState, transfer_id
from gateway.errors import (
    EventNotMapped,
    GatewayError,
    RetriesExhausted,
    RetryScheduled,
    TransientError,
    UnknownMerchant,
    error_class_of,
)
from gateway.settings import ProviderSettings, ServiceSettings, SettlementSettings
from gateway.settlement import follow_ups, pricing, route, steps, two_phase
from gateway.settlement.items import Item, SettleOutcome, Tally, step_failed
from gateway.settlement.ledger_ops import open_accounts
from gateway.settlement.posted_log import log_posted, log_settled

__all__ = ["RATE_FROM_MEMORY", "SettleOutcome", "Settler", "instruction_for"]

log = logging.getLogger(__name__)

# Rates are re-used in-process for a few seconds so a burst does not ask the
# currency-service once per payment; far shorter than any rate's validity.
_RATE_MEMO_S = 5.0
#: Where a rate came from when this process remembered it (`Settler.rate_from`).
RATE_FROM_MEMORY = "memory"


def instruction_for(
    event: Event,
    schemes: Mapping[str, str],
    merchants: Mapping[str, tuple[KeyRule, ...]] | None = None,
) -> SettlementInstruction | None:
    """The event's settlement instruction, or None when its source or type does not settle."""
    return instruction_of(event.provider, event.event_type, event.body, schemes, merchants)


class Settler:
    """Settles events against one ledger with rates from one source."""

    def __init__(
        self,
        settlement: SettlementSettings,
        providers: Mapping[str, ProviderSettings],
        services: Mapping[str, ServiceSettings],
        pool: Pool,
        ledger: Ledger,
        rates: RateSource,
    ) -> None:
        self._currency = settlement.currency
        self._converts = settlement.balances == "converted"
        # Sources whose clearing and payouts accounts exist in a currency (per currency).
        self._open_sources: set[tuple[str, str]] = set()
        self._schemes = {name: p.scheme for name, p in providers.items()}
        # Only a payment provider's events can be unmapped: another scheme never settles.
        self._park_unmapped = {
            name
            for name, p in providers.items()
            if p.unmapped == "park" and movements_of(p.scheme) is not None
        }
        self._merchants = {
            name: p.merchant for name, p in providers.items() if p.merchant is not None
        }
        self._sources = [*providers, *(f"service:{s}" for s in services)]
        self._pool = pool
        self._ledger = ledger
        self._rates = rates
        self._memo: dict[tuple[str, str], tuple[float, Rate]] = {}
        # Accounts seen to exist. Neither ledger ever deletes an account, so this only
        # saves asking again; an account not in it is looked up every time.
        self._open_accounts: set[int] = set()

    @property
    def currency(self) -> str:
        """The ledger currency every amount is converted to."""
        return self._currency

    @property
    def pool(self) -> Pool:
        return self._pool

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def instruction(self, event: Event) -> SettlementInstruction | None:
        """`instruction_for` with this gateway's providers; an event that moves no money
        of a provider with `unmapped = "park"` is `EventNotMapped` (parked)."""
        found = instruction_for(event, self._schemes, self._merchants)
        if found is None and event.provider in self._park_unmapped and event.event_type:
            raise EventNotMapped(
                f"{excerpt(event.provider)} events of type {excerpt(event.event_type)} move "
                "no money, and the provider parks them (unmapped = park)"
            )
        return found

    async def open_clearing_accounts(self) -> None:
        """Create each source's clearing and payouts accounts (idempotent), so its
        captures and payouts can post."""
        owners = [*self._sources, *(payouts_owner(source) for source in self._sources),
                  *(fees_owner(source) for source in self._sources), FX_OWNER]  # fmt: skip
        await open_accounts(
            self._ledger,
            PostgresAccountNames(self._pool),
            [clearing_name(owner, self._currency) for owner in owners],
        )

    async def settle(
        self, event: Event, attempt: int, with_settled: steps.WithSettled | None = None
    ) -> SettleOutcome:
        """Settle `event` (delivery number `attempt`); raise a `GatewayError` on failure.

        A batch of one, settled alone: its steps' spans join the current span."""
        instruction = self.instruction(event)
        if instruction is None:
            return SettleOutcome.IGNORED
        tid = transfer_id(instruction)
        item = Item(0, event, attempt, instruction, tid, tracing.current())
        return await self.settle_alone(item, with_settled)

    async def settle_alone(
        self, item: Item, with_settled: steps.WithSettled | None = None
    ) -> SettleOutcome:
        """Settle one item by the single-event rules (see `steps`); raise its error.

        A dispute fee told with the item settles first, as its own movement: should it
        fail, the item is retried whole (the fee is then a duplicate), and the item's
        own settling (and what commits with it) comes only after the fee is in."""
        fee = item.instruction.fee
        if fee is not None:
            await self._settle_one(dataclasses.replace(item, instruction=fee, tid=transfer_id(fee)))
        return await self._settle_one(item, with_settled)

    async def _settle_one(
        self, item: Item, with_settled: steps.WithSettled | None = None
    ) -> SettleOutcome:
        tally = await self.settle_items([item], alone=True, with_settled=with_settled)
        result = tally.decided.get(item.index)
        if isinstance(result, Exception):
            raise result
        if result is None:  # settled alone, every step decides: this is a bug
            raise RuntimeError("not settled")
        return result

    async def settle_items(
        self,
        items: Sequence[Item],
        *,
        alone: bool,
        with_settled: steps.WithSettled | None = None,
    ) -> Tally:
        """Settle distinct settlements together, step by step (`gateway.settlement.steps`):
        an outcome or an exception for each, or (not `alone`) left to be settled alone.
        `with_settled` commits with the marking of the posted items as settled."""
        tally = Tally()
        try:
            found = await steps.look_up(self._pool, items)
        except Exception as exc:
            return self._failed_step(tally, exc, items, alone)
        routed = tally.take(route.route(items, found, alone=alone))
        priced = tally.take(await pricing.price(routed, self))
        try:
            priced = tally.take(await follow_ups.net(self._pool, priced))
        except Exception as exc:
            return self._failed_step(tally, exc, [p.item for p in priced], alone)
        try:
            priced = tally.take(await two_phase.reserve(self._pool, priced))
        except Exception as exc:
            return self._failed_step(tally, exc, [p.item for p in priced], alone)
        try:
            priced = await steps.fix_pending(self._pool, priced)
        except Exception as exc:
            return self._failed_step(tally, exc, [p.item for p in priced], alone)
        postings = tally.take(steps.build(priced))
        try:
            answers = await steps.post(self._ledger, postings)
        except Exception as exc:
            return self._failed_step(tally, exc, [p.priced.item for p in postings], alone)
        posted = tally.take(steps.interpreted(answers))
        try:
            await steps.mark_settled(self._pool, posted, with_settled)
        except Exception as exc:
            return self._failed_step(tally, exc, [p.priced.item for p, _ in posted], alone)
        # One line per event cost about a tenth of the worker's CPU at full speed: each
        # event's line is a debug line, and a batch says what it posted in one line.
        each = log.isEnabledFor(logging.DEBUG)
        created = 0
        for posting, answer in posted:
            p = posting.priced
            if each:
                with tracing.activated(p.item.span):  # the log line carries its trace id
                    log_settled(
                        p.item.instruction, p.amount_minor, p.ledger_currency, p.rate, answer
                    )
            outcome = steps.outcome(answer)
            created += outcome is SettleOutcome.SETTLED
            tally.decided[p.item.index] = outcome
        if posted:
            log_posted(posted, created, posted[0][0].priced.ledger_currency)
        return tally

    @staticmethod
    def _failed_step(tally: Tally, exc: Exception, items: Sequence[Item], alone: bool) -> Tally:
        triage = step_failed(exc, items, alone=alone)
        if triage.alone:
            log.exception("batch step failed; settling its events one by one")
        tally.take(triage)
        return tally

    async def record_failure(self, event: Event, error: BaseException, final: bool) -> None:
        """Note a failed attempt on the settlement row (failed when `final`)."""
        try:
            instruction = self.instruction(event)
        except GatewayError:
            return  # the payload itself is bad: there is no settlement row to update
        if instruction is None:
            return
        error_class = error_class_of(error)
        async with connection(self._pool) as conn:
            if final:
                await store.set_state(
                    conn, transfer_id(instruction), SettlementState.FAILED, error_class
                )
            else:
                await store.note_failure(conn, transfer_id(instruction), error_class)

    @property
    def converts(self) -> bool:
        """Whether amounts are converted to `[settlement] currency` (`balances =
        "converted"`), or kept in their own currency (`"per_currency"`)."""
        return self._converts

    def ledger_currency_for(
        self, instruction: SettlementInstruction, payment: store.SettlementRow | None
    ) -> str:
        """The currency `instruction` posts in: `[settlement] currency` when amounts are
        converted; else the event's own, or for a follow-up its payment's."""
        if self._converts:
            return self._currency
        if payment is not None and payment.ledger_currency:
            return payment.ledger_currency
        return instruction.currency

    async def require_accounts(self, merchant: str, source: str, currency: str) -> None:
        """Raise `UnknownMerchant` unless the merchant's account in `currency` exists;
        per currency, open the source's clearing and payouts accounts in it first.

        Checked before posting: a ledger refuses for ever an id it once refused for a
        missing account, and the merchant may be opened later and the event replayed.
        """
        if not self._converts and (source, currency) not in self._open_sources:
            owners = (source, payouts_owner(source), fees_owner(source))
            names = [clearing_name(owner, currency) for owner in owners]
            await open_accounts(self._ledger, PostgresAccountNames(self._pool), names)
            self._open_sources.add((source, currency))
        account = merchant_account_id(merchant, currency)
        if account in self._open_accounts:
            return
        if await self._ledger.balance(account) is None:
            raise UnknownMerchant(f"merchant {excerpt(merchant)} has no {currency} account")
        self._open_accounts.add(account)

    async def rate_from(self, currency: str, attempt: int) -> tuple[Decimal, str]:
        """The rate from `currency` to the ledger's, for delivery number `attempt`, and
        where it came from: `memory` (this process asked within `_RATE_MEMO_S`), or the
        `RateOrigin` (`service`, `cache` when the service gave none, `identity`), for the
        `currency.rate` span. Raises `RetryScheduled`, `RetriesExhausted` or a permanent
        error when there is none."""
        key = (currency, self._currency)
        memo = self._memo.get(key)
        if memo is not None and time.monotonic() - memo[0] < _RATE_MEMO_S:
            return memo[1].rate, RATE_FROM_MEMORY
        decision = await self._rates.decide(currency, self._currency, attempt=attempt)
        if decision.action is RateAction.USE and decision.rate is not None:
            self._memo[key] = (time.monotonic(), decision.rate)
            origin = decision.origin.value if decision.origin is not None else "unknown"
            return decision.rate.rate, origin
        error = decision.error or TransientError(f"no rate for {currency}/{self._currency}")
        if decision.action is RateAction.RETRY and decision.delay_s is not None:
            raise RetryScheduled(error, decision.delay_s)
        if isinstance(error, TransientError):
            raise RetriesExhausted(error)  # RATE_UNAVAILABLE / RATE_STALE: schedule spent
        raise error
