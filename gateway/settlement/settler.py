"""Settling one event: extract the instruction, fix the rate, post the transfer once.

Used by the JetStream worker and by DLQ replay alike, so a replayed event goes through
exactly the same idempotency as a live one: the transfer id is derived from the
settlement, the ledger answers EXISTS to a repeat, and the amount and rate are fixed by
the first attempt.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Mapping
from decimal import Decimal

from gateway import tracing
from gateway.adapters.currency import RateSource
from gateway.adapters.postgres import Conn, Pool, connection
from gateway.adapters.postgres import settlements as store
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.core.currency import Rate, RateAction
from gateway.core.excerpt import excerpt
from gateway.core.ledger import Ledger, TransferResult, interpret
from gateway.core.ledger_accounts import clearing_name
from gateway.core.model import Event, ParsedBody
from gateway.core.money import convert_minor
from gateway.core.settlement import (
    SettlementInstruction,
    SettlementKind,
    SettlementState,
    build_transfer,
    from_internal,
    from_stripe,
    merchant_account_id,
    merchant_to_post,
    transfer_id,
)
from gateway.errors import (
    GatewayError,
    LedgerIdCollision,
    PaymentNotSettled,
    RetriesExhausted,
    RetryScheduled,
    TransientError,
    UnknownMerchant,
    error_class_of,
)
from gateway.settings import Settings
from gateway.settlement import traced
from gateway.settlement.ledger_ops import open_accounts

log = logging.getLogger(__name__)

# Rates are re-used in-process for a few seconds so a burst does not ask the
# currency-service once per payment; far shorter than any rate's validity.
_RATE_MEMO_S = 5.0
#: Where a rate came from when this process remembered it (`Settler.rate_from`).
RATE_FROM_MEMORY = "memory"


class SettleOutcome(enum.StrEnum):
    """How an event ended, as counted in `gateway_settlements_total{outcome}`."""

    SETTLED = "settled"
    DUPLICATE = "duplicate"  # already settled: nothing moved
    IGNORED = "ignored"  # an event type that does not settle


def instruction_for(event: Event, schemes: Mapping[str, str]) -> SettlementInstruction | None:
    """The event's settlement instruction, or None when its source or type does not settle."""
    if event.event_type is None:
        return None
    doc = ParsedBody(event.body).json()
    if event.provider.startswith("service:"):
        return from_internal(event.event_type, doc)
    if schemes.get(event.provider) == "stripe":
        return from_stripe(event.event_type, doc)
    return None


def log_settled(
    instruction: SettlementInstruction,
    amount_minor: int,
    currency: str,
    rate: Decimal,
    result: TransferResult,
) -> None:
    """The log line of one posted settlement."""
    log.info(
        "settled",
        extra={
            "settlement_id": instruction.settlement_id,
            "kind": instruction.kind.value,
            "amount_minor": amount_minor,
            "currency": currency,
            "rate": str(rate),
            "result": result.value,
        },
    )


def check_same(existing: store.SettlementRow, instruction: SettlementInstruction) -> None:
    """A second event for a settlement must say the same thing as the first.

    The transfer id comes from the settlement id alone, so a repeat with another amount,
    currency or merchant would otherwise be waved through as a duplicate; it is a data
    problem someone has to look at, and it is raised as the critical id collision.
    """
    same = (
        existing.amount_minor == instruction.amount_minor
        and existing.currency == instruction.currency
        and (instruction.merchant_id is None or existing.merchant_id == instruction.merchant_id)
    )
    if not same:
        merchant = None if instruction.merchant_id is None else excerpt(instruction.merchant_id)
        raise LedgerIdCollision(
            f"settlement {excerpt(instruction.key)} was recorded as {existing.amount_minor} "
            f"{existing.currency} for {excerpt(existing.merchant_id)}; this event says "
            f"{instruction.amount_minor} {instruction.currency} for {merchant}"
        )


class Settler:
    """Settles events against one ledger with rates from one source."""

    def __init__(self, settings: Settings, pool: Pool, ledger: Ledger, rates: RateSource) -> None:
        self._currency = settings.settlement.currency
        self._schemes = {name: p.scheme for name, p in settings.providers.items()}
        self._sources = [*settings.providers, *(f"service:{s}" for s in settings.services)]
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
        """`instruction_for` with this gateway's providers."""
        return instruction_for(event, self._schemes)

    async def open_clearing_accounts(self) -> None:
        """Create each source's clearing account (idempotent), so captures can post."""
        await open_accounts(
            self._ledger,
            PostgresAccountNames(self._pool),
            [clearing_name(source, self._currency) for source in self._sources],
        )

    async def settle(self, event: Event, attempt: int) -> SettleOutcome:
        """Settle `event` (delivery number `attempt`); raise a `GatewayError` on failure."""
        instruction = self.instruction(event)
        if instruction is None:
            return SettleOutcome.IGNORED
        tid = transfer_id(instruction)
        async with connection(self._pool) as conn:
            existing = await store.by_transfer(conn, tid)
            if existing is not None:
                check_same(existing, instruction)
                if existing.state is SettlementState.SETTLED:
                    return SettleOutcome.DUPLICATE
            merchant = await self._merchant(conn, instruction)
        await self.require_account(merchant)
        if existing is not None and existing.ledger_amount_minor and existing.rate_at_payment:
            amount_minor, rate = existing.ledger_amount_minor, existing.rate_at_payment
        else:
            if tracing.ENABLED:
                rate = await traced.rate(self.rate_from, None, instruction.currency, attempt)
            else:
                rate = await self.rate(instruction.currency, attempt)
            amount_minor = convert_minor(
                instruction.amount_minor, rate, instruction.currency, self._currency
            )
            async with connection(self._pool) as conn:
                fixed = await store.fix_pending(
                    conn,
                    instruction,
                    transfer_id=tid,
                    provider=event.provider,
                    merchant_id=merchant,
                    ledger_amount_minor=amount_minor,
                    ledger_currency=self._currency,
                    rate=rate,
                )
            amount_minor = fixed.ledger_amount_minor or amount_minor
            rate = fixed.rate_at_payment or rate
        transfer = build_transfer(
            instruction,
            provider=event.provider,
            ledger_currency=self._currency,
            amount_minor=amount_minor,
            rate_at_payment=rate,
            merchant_id=merchant,
        )
        if tracing.ENABLED:
            with tracing.current_child("ledger.post", {"gateway.batch_size": 1}):
                [result] = await self._ledger.post([transfer])
        else:
            [result] = await self._ledger.post([transfer])
        result = interpret(result, transfer)
        async with connection(self._pool) as conn:
            await store.set_state(conn, tid, SettlementState.SETTLED)
        log_settled(instruction, amount_minor, self._currency, rate, result)
        return (
            SettleOutcome.SETTLED if result is TransferResult.CREATED else SettleOutcome.DUPLICATE
        )

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

    async def _merchant(self, conn: Conn, instruction: SettlementInstruction) -> str:
        capture = None
        if instruction.kind is SettlementKind.REFUND:
            capture = await store.capture_of(conn, instruction.settlement_id)
        merchant = merchant_to_post(instruction, capture.settled_merchant if capture else None)
        if merchant is None:
            # The payment's event may still be on its way: transient, DLQ after the schedule.
            raise PaymentNotSettled(
                f"refund of {excerpt(instruction.settlement_id)} before its payment settled"
            )
        return merchant

    async def require_account(self, merchant: str) -> None:
        """Raise `UnknownMerchant` unless the merchant's account exists.

        Checked before posting: a ledger refuses for ever an id it once refused for a
        missing account, and the merchant may be opened later and the event replayed.
        """
        account = merchant_account_id(merchant, self._currency)
        if account in self._open_accounts:
            return
        if await self._ledger.balance(account) is None:
            raise UnknownMerchant(f"merchant {excerpt(merchant)} has no {self._currency} account")
        self._open_accounts.add(account)

    async def rate(self, currency: str, attempt: int) -> Decimal:
        """The rate from `currency` to the ledger's, for delivery number `attempt`; raises
        `RetryScheduled`, `RetriesExhausted` or a permanent error when there is none."""
        rate, _ = await self.rate_from(currency, attempt)
        return rate

    async def rate_from(self, currency: str, attempt: int) -> tuple[Decimal, str]:
        """`rate`, and where it came from: `memory` (this process asked within
        `_RATE_MEMO_S`), or the `RateOrigin` (`service`, `cache` when the service gave
        none, `identity`); for the `currency.rate` span."""
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
