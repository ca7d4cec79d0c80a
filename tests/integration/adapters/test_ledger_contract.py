"""One contract for every ledger backend: TigerBeetle's semantics, real balances.

The PostgreSQL ledger always runs (a fresh migrated database per test). TigerBeetle runs
only when `TIGERBEETLE_ADDRESS` names a cluster (`TIGERBEETLE_CLUSTER_ID`, default 0):
its server cannot be installed on these machines. Every test uses ids of its own, so a
long-lived TigerBeetle cluster can serve many runs. The in-memory fake of the unit tests
(`tests.support.fakes.MemoryLedger`) runs too, with no service: this suite is what shows
the fake is honest. Batches larger than one TigerBeetle request (`BATCH_MAX` events) run
on every backend: one call, every result at its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal

import pytest

from gateway.adapters.postgres import Conn, open_pool
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.adapters.tigerbeetle import BATCH_MAX, TigerBeetleLedger, open_tigerbeetle
from gateway.core.ledger.ids import clearing_account, merchant_account, settlement_ref
from gateway.core.ledger.port import (
    AccountCode,
    AccountSpec,
    Ledger,
    LedgerTransfer,
    PostedTransfer,
    TransferPhase,
    TransferResult,
    interpret,
    verify_totals,
)
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
)
from gateway.errors import LedgerIdCollision, LedgerImbalance, LedgerUnavailable
from tests.support.fakes import MemoryLedger
from tests.support.services import free_port

R = TransferResult
RATE = Decimal("1.08")


@pytest.fixture(params=["memory", "postgres", "tigerbeetle"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The backend's name and, for PostgreSQL, its database's DSN."""
    # A synchronous fixture, so the database is asked for only when it is needed: the
    # session's template database is built by a synchronous fixture that cannot start
    # inside the running event loop of an async one.
    name: str = request.param
    if name == "postgres":
        database_url: str = request.getfixturevalue("database_url")
        return name, database_url
    return name, None


@pytest.fixture
async def ledger(backend: tuple[str, str | None]) -> AsyncIterator[Ledger]:
    """Each backend in turn, behind the same port."""
    name, database_url = backend
    if name == "memory":
        yield MemoryLedger()
        return
    if database_url is not None:
        async with open_pool(database_url, max_size=8) as pool:
            yield PostgresLedger(pool)
        return
    async with tigerbeetle_or_skip() as tb_ledger:
        yield tb_ledger


@contextlib.asynccontextmanager
async def tigerbeetle_or_skip() -> AsyncIterator[TigerBeetleLedger]:
    """The cluster `TIGERBEETLE_ADDRESS` names; the test is skipped without one."""
    address = os.environ.get("TIGERBEETLE_ADDRESS")
    if not address:
        pytest.skip("TIGERBEETLE_ADDRESS not set: no TigerBeetle server here")
    cluster_id = int(os.environ.get("TIGERBEETLE_CLUSTER_ID", "0"))
    async with open_tigerbeetle(cluster_id, address, timeout_s=10.0) as tb_ledger:
        yield tb_ledger


class Book:
    """A provider, a merchant and helpers to build their transfers; unique per test."""

    def __init__(self, *, limited: bool = False) -> None:
        tag = uuid.uuid4().hex[:12]
        self.provider = f"psp_{tag}"
        self.merchant = f"m_{tag}"
        self.clearing = clearing_account(self.provider, "USD")
        # Merchant accounts have no debit limit; `limited` gives this one the flag, to
        # hold every backend to the flag's semantics all the same.
        self.account = dataclasses.replace(
            merchant_account(self.merchant, "USD"), debits_must_not_exceed_credits=limited
        )

    def capture(self, settlement_id: str, amount_minor: int) -> LedgerTransfer:
        return self._transfer(SettlementKind.CAPTURE, settlement_id, None, amount_minor)

    def refund(self, settlement_id: str, refund_id: str, amount_minor: int) -> LedgerTransfer:
        return self._transfer(SettlementKind.REFUND, settlement_id, refund_id, amount_minor)

    def follow_up(
        self, kind: SettlementKind, settlement_id: str, own_id: str, amount_minor: int
    ) -> LedgerTransfer:
        return self._transfer(kind, settlement_id, own_id, amount_minor)

    def authorisation(self, settlement_id: str, amount_minor: int) -> LedgerTransfer:
        payment = f"{self.merchant}:{settlement_id}"
        return self._transfer(SettlementKind.AUTHORISATION, settlement_id, payment, amount_minor)

    def void(self, settlement_id: str, amount_minor: int) -> LedgerTransfer:
        payment = f"{self.merchant}:{settlement_id}"
        return self._transfer(SettlementKind.VOID, settlement_id, payment, amount_minor)

    def authorised_capture(self, settlement_id: str, amount_minor: int) -> LedgerTransfer:
        return self._transfer(
            SettlementKind.CAPTURE, settlement_id, None, amount_minor, authorised=True
        )

    def _transfer(
        self,
        kind: SettlementKind,
        settlement_id: str,
        refund_id: str | None,
        amount_minor: int,
        *,
        authorised: bool = False,
    ) -> LedgerTransfer:
        instruction = SettlementInstruction(
            settlement_id=f"{self.merchant}:{settlement_id}", kind=kind, merchant_id=self.merchant,
            amount_minor=amount_minor, currency="USD", refund_id=refund_id, source_event_id=None,
        )  # fmt: skip
        return build_transfer(instruction, provider=self.provider, ledger_currency="USD",
                              amount_minor=amount_minor, rate_at_payment=RATE,
                              authorised=authorised)  # fmt: skip


@pytest.fixture
async def book(ledger: Ledger) -> Book:
    """A book whose two accounts exist."""
    b = Book()
    await ledger.ensure_accounts([b.clearing, b.account])
    return b


async def merchant_credit(ledger: Ledger, book: Book) -> int:
    balance = await ledger.balance(book.account.id)
    assert balance is not None
    return balance.credit_balance_minor


async def test_post_creates_and_moves_balances(ledger: Ledger, book: Book) -> None:
    """A capture debits clearing and credits the merchant by exactly its amount."""
    assert await ledger.post([book.capture("p1", 1000)]) == [R.CREATED]
    clearing = await ledger.balance(book.clearing.id)
    merchant = await ledger.balance(book.account.id)
    assert clearing is not None and merchant is not None
    assert (clearing.debits_posted, clearing.credits_posted) == (1000, 0)
    assert (merchant.debits_posted, merchant.credits_posted) == (0, 1000)


async def test_repost_is_exists_and_moves_nothing(ledger: Ledger, book: Book) -> None:
    """The same transfer again, alone or twice in one batch, is EXISTS; money moves once."""
    t = book.capture("p1", 1000)
    assert await ledger.post([t, t]) == [R.CREATED, R.EXISTS]
    assert await ledger.post([t]) == [R.EXISTS]
    assert interpret(R.EXISTS, t) is R.EXISTS
    assert await merchant_credit(ledger, book) == 1000


async def test_same_id_different_amount_is_a_collision(ledger: Ledger, book: Book) -> None:
    """An id reused with other fields is refused and changes nothing."""
    first = book.capture("p1", 1000)
    await ledger.post([first])
    clash = LedgerTransfer(**{**first.__dict__, "amount_minor": 999})
    results = await ledger.post([clash])
    assert results == [R.EXISTS_WITH_DIFFERENT_FIELDS]
    with pytest.raises(LedgerIdCollision):
        interpret(results[0], clash)
    assert await merchant_credit(ledger, book) == 1000


@pytest.fixture
async def limited_book(ledger: Ledger) -> Book:
    """A book whose merchant account has a debit limit."""
    b = Book(limited=True)
    await ledger.ensure_accounts([b.clearing, b.account])
    return b


async def test_an_account_with_a_debit_limit_cannot_go_negative(
    ledger: Ledger, limited_book: Book
) -> None:
    """Debiting more than was credited is EXCEEDS_CREDITS; the id stays refused after."""
    book = limited_book
    await ledger.post([book.capture("p1", 1000)])
    too_much = book.refund("p1", "r1", 1500)
    fits = book.refund("p1", "r2", 400)
    assert await ledger.post([too_much, fits]) == [R.EXCEEDS_CREDITS, R.CREATED]
    assert await merchant_credit(ledger, book) == 600
    # Even once the merchant could afford it, the refused id is never posted.
    await ledger.post([book.capture("p2", 5000)])
    assert await ledger.post([too_much]) == [R.ID_ALREADY_FAILED]
    assert await merchant_credit(ledger, book) == 5600


async def test_missing_accounts_are_reported(ledger: Ledger, book: Book) -> None:
    """A transfer to an account that does not exist is refused; its balance is None."""
    stranger = Book()
    stranger.provider = book.provider
    stranger.clearing = book.clearing
    assert await ledger.post([stranger.capture("p1", 10)]) == [R.CREDIT_ACCOUNT_NOT_FOUND]
    assert await ledger.balance(stranger.account.id) is None


async def test_balances_carry_each_accounts_ledger_and_code(ledger: Ledger, book: Book) -> None:
    """`balance` and `balances` report the account's ledger (currency) and code (kind):
    the operator's view reads kind and currency from them when no name is recorded."""
    listed = {b.account_id: b for b in await ledger.balances()}
    for spec in (book.clearing, book.account):
        one = await ledger.balance(spec.id)
        assert one is not None
        assert (one.ledger, one.code) == (spec.ledger, int(spec.code))
        assert (listed[spec.id].ledger, listed[spec.id].code) == (spec.ledger, int(spec.code))


async def test_a_merchant_goes_negative_through_money_already_taken_back(
    ledger: Ledger, book: Book
) -> None:
    """A merchant account has no debit limit: a chargeback after a refund of most of the
    payment takes it below zero, and every movement kind posts with its own code."""
    k = SettlementKind
    posted = [
        book.capture("p1", 1000),
        book.follow_up(k.REFUND, "p1", "re_1", 900),
        book.follow_up(k.CHARGEBACK, "p1", "dp_1", 1000),
        book.follow_up(k.REFUND_REVERSAL, "p1", "re_1", 900),
        book.follow_up(k.CHARGEBACK_REVERSAL, "p1", "dp_1", 1000),
    ]
    assert await ledger.post(posted[:3]) == [R.CREATED] * 3
    balance = await ledger.balance(book.account.id)
    assert balance is not None and balance.credits_posted - balance.debits_posted == -900
    assert await ledger.post(posted[3:]) == [R.CREATED] * 2
    assert await merchant_credit(ledger, book) == 1000
    found = await ledger.lookup_transfers([t.id for t in posted])
    assert [f.code if f else None for f in found] == [int(t.code) for t in posted]
    assert {t.code.name for t in posted} == {
        m.name for m in SettlementKind if m.follows_payment
    } | {"CAPTURE"}
    assert verify_totals(await ledger.check()).balanced


async def pending_and_posted(ledger: Ledger, book: Book) -> tuple[int, int]:
    """The merchant's reserved credits and its balance."""
    balance = await ledger.balance(book.account.id)
    assert balance is not None
    return balance.credits_pending, balance.credit_balance_minor


async def test_an_authorisation_reserves_and_a_partial_capture_posts_it(
    ledger: Ledger, book: Book
) -> None:
    """A pending transfer reserves without moving; posting less than it releases the
    rest; the post is EXISTS when repeated and the pending transfer is resolved once."""
    auth = book.authorisation("p1", 1000)
    capture = book.authorised_capture("p1", 600)
    assert await ledger.post([auth]) == [R.CREATED]
    assert await pending_and_posted(ledger, book) == (1000, 0)
    assert await ledger.post([capture, capture]) == [R.CREATED, R.EXISTS]
    assert await pending_and_posted(ledger, book) == (0, 600)
    clearing = await ledger.balance(book.clearing.id)
    assert clearing is not None and (clearing.debits_pending, clearing.debits_posted) == (0, 600)
    found = await ledger.lookup_transfers([auth.id, capture.id])
    assert [(f.phase, f.pending_id, f.amount_minor) for f in found if f] == [
        (TransferPhase.PENDING, 0, 1000),
        (TransferPhase.POST, auth.id, 600),
    ]
    again = dataclasses.replace(capture, id=capture.id + 1)  # another post of the same
    void = book.void("p1", 1000)
    assert await ledger.post([again, void]) == [
        R.PENDING_TRANSFER_ALREADY_POSTED,
        R.PENDING_TRANSFER_ALREADY_POSTED,
    ]
    assert verify_totals(await ledger.check()).balanced


async def test_a_void_releases_the_reservation(ledger: Ledger, book: Book) -> None:
    """A void of another amount is refused; of the reserved amount, it releases it all,
    and nothing can post the pending transfer after."""
    assert await ledger.post([book.authorisation("p1", 1000)]) == [R.CREATED]
    short = book.void("p1", 999)
    assert await ledger.post([short]) == [R.PENDING_TRANSFER_HAS_DIFFERENT_AMOUNT]
    void = dataclasses.replace(short, id=short.id + 1, amount_minor=1000)
    assert await ledger.post([void]) == [R.CREATED]
    assert await pending_and_posted(ledger, book) == (0, 0)
    assert await ledger.post([book.authorised_capture("p1", 10)]) == [
        R.PENDING_TRANSFER_ALREADY_VOIDED
    ]
    assert await pending_and_posted(ledger, book) == (0, 0)


async def test_posts_that_do_not_match_their_pending_transfer_are_refused(
    ledger: Ledger, book: Book
) -> None:
    """More than reserved, another account, a plain transfer as pending, or a pending
    transfer that is not there: each refused with its own answer, nothing moves; the
    missing one burns its id, as TigerBeetle does."""
    auth = book.authorisation("p1", 1000)
    plain = book.capture("p2", 50)
    assert await ledger.post([auth, plain]) == [R.CREATED, R.CREATED]
    over = book.authorised_capture("p1", 1001)
    other = Book()
    await ledger.ensure_accounts([other.account])
    elsewhere = dataclasses.replace(
        book.authorised_capture("p1", 10), credit_account_id=other.account.id
    )
    not_pending = dataclasses.replace(
        book.authorised_capture("p2", 10), id=plain.id + 1, pending_id=plain.id
    )
    missing = book.authorised_capture("p3", 10)
    assert await ledger.post([over, elsewhere, not_pending, missing]) == [
        R.EXCEEDS_PENDING_TRANSFER_AMOUNT,
        R.PENDING_TRANSFER_HAS_DIFFERENT_FIELDS,
        R.PENDING_TRANSFER_NOT_PENDING,
        R.PENDING_TRANSFER_NOT_FOUND,
    ]
    assert await pending_and_posted(ledger, book) == (1000, 50)
    await ledger.post([book.authorisation("p3", 10)])
    assert await ledger.post([missing]) == [R.ID_ALREADY_FAILED]


async def test_a_reservation_counts_against_a_limit(ledger: Ledger, limited_book: Book) -> None:
    """On an account with a debit limit, what pending debits reserve cannot be spent."""
    book = limited_book
    await ledger.post([book.capture("p1", 1000)])
    hold = book.follow_up(SettlementKind.REFUND, "p1", "re_1", 800)
    hold = dataclasses.replace(hold, phase=TransferPhase.PENDING)
    assert await ledger.post([hold, book.refund("p1", "re_2", 300)]) == [
        R.CREATED,
        R.EXCEEDS_CREDITS,
    ]
    balance = await ledger.balance(book.account.id)
    assert balance is not None and (balance.debits_pending, balance.credit_balance_minor) == (
        800,
        1000,
    )


async def test_ensure_accounts_is_idempotent(ledger: Ledger, book: Book) -> None:
    """Ensuring existing accounts is a no-op; the same id with other flags is a collision."""
    await ledger.ensure_accounts([book.clearing, book.account])
    await ledger.post([book.capture("p1", 10)])
    await ledger.ensure_accounts([book.account])
    assert await merchant_credit(ledger, book) == 10
    changed = AccountSpec(
        id=book.account.id,
        ledger=book.account.ledger,
        code=AccountCode.MERCHANT,
        credits_must_not_exceed_debits=True,
    )
    with pytest.raises(LedgerIdCollision):
        await ledger.ensure_accounts([changed])


async def test_check_holds_after_many_postings(ledger: Ledger) -> None:
    """After hundreds of captures and refunds in batches, debits equal credits."""
    rng = random.Random(7)
    books = [Book() for _ in range(5)]
    await ledger.ensure_accounts([a for b in books for a in (b.clearing, b.account)])
    expected = {b.account.id: 0 for b in books}
    for round_no in range(20):
        batch: list[tuple[Book, LedgerTransfer, int]] = []
        for i in range(10):
            b = rng.choice(books)
            amount = rng.randint(1, 5000)
            if rng.random() < 0.3:
                batch.append((b, b.refund(f"p{round_no}", f"r{round_no}-{i}", amount), -amount))
            else:
                batch.append((b, b.capture(f"p{round_no}-{i}", amount), amount))
        results = await ledger.post([t for _, t, _ in batch])
        for (b, _, delta), result in zip(batch, results, strict=True):
            if result is R.CREATED:
                expected[b.account.id] += delta
            else:
                assert result is R.EXCEEDS_CREDITS and expected[b.account.id] + delta < 0
    for b in books:
        assert await merchant_credit(ledger, b) == expected[b.account.id]
    assert verify_totals(await ledger.check()).balanced


async def test_concurrent_posts_of_one_transfer_move_money_once(ledger: Ledger, book: Book) -> None:
    """Twenty workers posting the same transfer at once: one CREATED, the rest EXISTS."""
    t = book.capture("p1", 700)
    results = await asyncio.gather(*(ledger.post([t]) for _ in range(20)))
    flat = [r for batch in results for r in batch]
    assert flat.count(R.CREATED) == 1
    assert flat.count(R.EXISTS) == 19
    assert await merchant_credit(ledger, book) == 700


async def test_concurrent_posts_to_one_account_lose_no_update(ledger: Ledger, book: Book) -> None:
    """Distinct transfers racing on the same accounts all land, in full."""
    transfers = [book.capture(f"p{i}", i + 1) for i in range(30)]
    results = await asyncio.gather(*(ledger.post([t]) for t in transfers))
    assert all(r == [R.CREATED] for r in results)
    assert await merchant_credit(ledger, book) == sum(range(1, 31))
    assert (await ledger.check()).balanced


# --- batches over one TigerBeetle request ------------------------------------------------


async def test_a_batch_over_one_requests_limit_lands_whole_with_each_result_in_place(
    ledger: Ledger, book: Book
) -> None:
    """`BATCH_MAX` + 2 transfers in one post: TigerBeetle needs two requests. The last
    event of the first request repeats its first (EXISTS); the first of the second reuses
    an id of the first request with another amount (a collision across requests); the
    last has no account. Every other transfer is CREATED, once."""
    transfers = [book.capture(f"p{i}", 1) for i in range(BATCH_MAX + 2)]
    transfers[BATCH_MAX - 1] = transfers[0]
    transfers[BATCH_MAX] = LedgerTransfer(**{**transfers[1].__dict__, "amount_minor": 2})
    stranger = Book()
    stranger.provider, stranger.clearing = book.provider, book.clearing
    transfers[BATCH_MAX + 1] = stranger.capture("p0", 1)
    results = await ledger.post(transfers)
    assert len(results) == len(transfers)
    assert results[: BATCH_MAX - 1] == [R.CREATED] * (BATCH_MAX - 1)
    assert results[BATCH_MAX - 1 :] == [R.EXISTS, R.EXISTS_WITH_DIFFERENT_FIELDS,
                                         R.CREDIT_ACCOUNT_NOT_FOUND]  # fmt: skip
    assert await merchant_credit(ledger, book) == BATCH_MAX - 1
    # Again, whole: what landed is EXISTS, the refused ids stay refused.
    again = await ledger.post(transfers)
    assert again[: BATCH_MAX - 1] == [R.EXISTS] * (BATCH_MAX - 1)
    assert again[BATCH_MAX - 1 :] == [R.EXISTS, R.EXISTS_WITH_DIFFERENT_FIELDS,
                                       R.ID_ALREADY_FAILED]  # fmt: skip
    assert await merchant_credit(ledger, book) == BATCH_MAX - 1
    assert (await ledger.check()).balanced


async def test_lookup_transfers_reads_back_each_posted_transfer_at_its_place(
    ledger: Ledger, book: Book
) -> None:
    """Ids over one request's limit, with some never posted: each posted transfer comes
    back as posted (settlement hash, rate), None for the others, in the order asked."""
    posted = [book.capture(f"p{i}", i + 1) for i in range(BATCH_MAX + 1)]
    assert set(await ledger.post(posted)) == {R.CREATED}
    never = [book.capture(f"never{i}", 5) for i in range(3)]
    asked = [never[0], *posted[:BATCH_MAX], never[1], posted[BATCH_MAX], never[2]]
    found = await ledger.lookup_transfers([t.id for t in asked])
    expected: list[PostedTransfer | None] = [
        None if t in never else PostedTransfer(
            id=t.id, debit_account_id=t.debit_account_id, credit_account_id=t.credit_account_id,
            amount_minor=t.amount_minor, ledger=t.ledger, code=int(t.code),
            settlement_ref=settlement_ref(t.settlement_id), rate_at_payment=RATE,
        )
        for t in asked
    ]  # fmt: skip
    assert found == expected


async def test_tigerbeetle_ensures_more_accounts_than_one_request_holds() -> None:
    """`BATCH_MAX` + 1 accounts in one call, then again (a no-op), then looked up."""
    async with tigerbeetle_or_skip() as tb_ledger:
        books = [Book() for _ in range(BATCH_MAX + 1)]
        specs = [b.account for b in books]
        await tb_ledger.ensure_accounts(specs)
        await tb_ledger.ensure_accounts(specs)
        missing = Book().account.id
        found = await tb_ledger.lookup_balances([missing, *(s.id for s in specs)])
        assert found[0] is None
        assert [(b.account_id, b.ledger, b.code) if b else None for b in found[1:]] == [
            (s.id, s.ledger, int(s.code)) for s in specs
        ]


async def test_tigerbeetle_check_over_many_pages_sees_no_imbalance_while_money_moves() -> None:
    """`gateway ledger check` beside a live settlement worker posting in batches: the
    accounts are read in four pages or more while captures land between them, and no
    check is an imbalance (each sums one state of the cluster, or says it could not:
    `LedgerUnavailable`)."""
    async with tigerbeetle_or_skip() as tb_ledger:
        book = Book()
        await tb_ledger.ensure_accounts([book.clearing, book.account])
        accounts = len(await tb_ledger.balances())
        # The same client, in pages small enough that one read takes four requests or more.
        page_size = min(max(accounts // 4, 2), 8000)
        paged = TigerBeetleLedger(tb_ledger._client, page_size=page_size)
        # A worker's batches come further apart than a pair of whole reads takes (on a
        # cluster of many accounts, on a busy machine, a read takes longer): the wait
        # between batches is three pairs' time, so a check has a moment to fit in.
        started = time.monotonic()
        await paged.balances()
        await paged.balances()
        between_batches_s = max(0.3, 3 * (time.monotonic() - started))
        moving = True

        async def settle() -> int:
            posted = 0
            while moving:
                for _ in range(10):  # a batch, one transfer after the other
                    await tb_ledger.post([book.capture(f"p{posted}", 1 + posted % 97)])
                    posted += 1
                await asyncio.sleep(between_batches_s)
            return posted

        worker = asyncio.create_task(settle())
        outcomes: list[str] = []
        try:
            for _ in range(10):
                try:
                    outcomes.append("balanced" if (await paged.check()).balanced else "imbalance")
                except LedgerUnavailable:
                    outcomes.append("moving")
        finally:
            moving = False
            posted = await worker
        assert posted > 0
        assert "imbalance" not in outcomes
        assert "balanced" in outcomes, outcomes
        assert verify_totals(await paged.check()).balanced


# --- backend-specific ----------------------------------------------------------------------


async def test_postgres_check_detects_an_imbalance(database_url: str) -> None:
    """A balance changed behind the ledger's back fails `check` with LEDGER_IMBALANCE."""
    async with open_pool(database_url) as pool:
        ledger = PostgresLedger(pool)
        b = Book()
        await ledger.ensure_accounts([b.clearing, b.account])
        await ledger.post([b.capture("p1", 100)])
        await pool.execute(
            "UPDATE ledger_accounts SET credits_posted = credits_posted + 1 WHERE id = $1",
            b.account.id,
        )
        with pytest.raises(LedgerImbalance):
            verify_totals(await ledger.check())


async def test_postgres_transfer_rows_keep_settlement_and_rate(database_url: str) -> None:
    """The transfer row records which settlement it is and the rate used."""
    async with open_pool(database_url) as pool:
        ledger = PostgresLedger(pool)
        b = Book()
        await ledger.ensure_accounts([b.clearing, b.account])
        t = b.capture("p1", 100)
        await ledger.post([t])
        row = await pool.fetchrow(
            "SELECT settlement_id, rate_at_payment, amount FROM ledger_transfers WHERE id = $1",
            t.id,
        )
        assert row is not None
        assert (row["settlement_id"], row["rate_at_payment"], int(row["amount"])) == (
            t.settlement_id,
            RATE,
            100,
        )


async def test_tigerbeetle_unreachable_is_unavailable_within_the_deadline() -> None:
    """With no cluster listening, a post gives up at its deadline: LEDGER_UNAVAILABLE."""
    address = f"127.0.0.1:{free_port()}"
    b = Book()
    async with open_tigerbeetle(0, address, timeout_s=0.5) as tb_ledger:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(LedgerUnavailable):
            await tb_ledger.post([b.capture("p1", 100)])
        assert loop.time() - started < 3.0


async def test_postgres_batch_raced_by_a_concurrent_commit_is_answered_one_by_one(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id committed by someone else between the batch's look-up and its insert (with
    other accounts: ours are locked) is a collision for that transfer only."""
    from gateway.adapters.postgres import ledger as ledger_postgres

    async with open_pool(database_url) as pool:
        ledger = PostgresLedger(pool)
        mine, theirs = Book(), Book()
        await ledger.ensure_accounts([mine.clearing, mine.account, theirs.clearing, theirs.account])
        raced = mine.capture("p1", 100)
        # The other poster's transfer with the same id, on its own accounts.
        other = LedgerTransfer(
            id=raced.id, debit_account_id=theirs.clearing.id, credit_account_id=theirs.account.id,
            amount_minor=100, ledger=raced.ledger, code=raced.code,
            settlement_id=raced.settlement_id, rate_at_payment=RATE,
        )  # fmt: skip
        assert await ledger.post([other]) == [R.CREATED]
        # The bulk pass does not see it (as if it committed after the look-up) ...
        taken = ledger_postgres._SELECT_TAKEN
        blind = taken.replace(
            "FROM ledger_transfers WHERE", "FROM ledger_transfers WHERE false AND"
        )
        assert blind != taken
        real_post = ledger_postgres._post
        bulk_calls: list[bool] = []

        async def racing_post(
            conn: Conn, transfers: Sequence[LedgerTransfer], *, bulk: bool
        ) -> list[TransferResult]:
            bulk_calls.append(bulk)
            with monkeypatch.context() as m:
                m.setattr(ledger_postgres, "_SELECT_TAKEN", blind if bulk else taken)
                return await real_post(conn, transfers, bulk=bulk)

        monkeypatch.setattr(ledger_postgres, "_post", racing_post)
        results = await ledger.post([raced, mine.capture("p2", 250)])
        # ... so it is rolled back and answered one by one.
        assert bulk_calls == [True, False]
        assert results == [R.EXISTS_WITH_DIFFERENT_FIELDS, R.CREATED]
        assert await merchant_credit(ledger, mine) == 250
        assert await merchant_credit(ledger, theirs) == 100
        verify_totals(await ledger.check())
