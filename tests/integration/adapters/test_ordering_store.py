"""The ordering store on a real PostgreSQL: the compare-and-set moves a key once, in
order, with its log rows; holds, deferrals and an operator's release."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from gateway.adapters.postgres.ordering import applied as ordering
from gateway.adapters.postgres.ordering import key_moves
from gateway.adapters.postgres.ordering.key_moves import Advance


def step(seq: int, key: str = "pi_1", outcome: str = "applied") -> Advance:
    return Advance("stripe", key, seq, outcome, f"evt_{key}_{seq}")


async def log_of(conn: asyncpg.Connection, key: str = "pi_1") -> list[tuple[int, str]]:
    rows = await conn.fetch(
        "SELECT key_seq, outcome FROM order_log WHERE order_key = $1 ORDER BY id", key
    )
    return [(int(r["key_seq"]), r["outcome"]) for r in rows]


async def test_turns_move_their_keys_and_a_second_number_of_a_key_still_moves_after_it(
    database_url: str,
) -> None:
    """`apply_turns` (the settlement gate's rounds, one turn a key): each key moves to its
    number with an 'applied' log row; given two numbers of one key after all, the second
    is not taken for moved but moves after the first (the general way)."""
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await key_moves.apply_turns(
                conn, [("stripe", "pi_b", 1, "e_b1"), ("stripe", "pi_a", 1, "e_a1")]
            )
        async with conn.transaction():
            await key_moves.apply_turns(
                conn, [("stripe", "pi_a", 3, "e_a3"), ("stripe", "pi_a", 2, "e_a2")]
            )
        state = await ordering.states(conn, [("stripe", "pi_a"), ("stripe", "pi_b")])
        assert state[("stripe", "pi_a")].applied_seq == 3
        assert state[("stripe", "pi_b")].applied_seq == 1
        assert await log_of(conn, "pi_a") == [(1, "applied"), (2, "applied"), (3, "applied")]
        rows = await conn.fetch(
            "SELECT event_id FROM order_log WHERE order_key = 'pi_a' ORDER BY id"
        )
        assert [r["event_id"] for r in rows] == ["e_a1", "e_a2", "e_a3"]
    finally:
        await conn.close()


async def test_a_run_of_one_key_moves_in_one_call_and_a_gap_stops_it(database_url: str) -> None:
    """1, 2 and 3 move together from 0; 5 after a gap and a repeat of 2 move nothing."""
    conn = await asyncpg.connect(database_url)
    try:
        moved = await key_moves.advance(conn, [step(2), step(1), step(3), step(5), step(2)])
        assert moved == {("stripe", "pi_1", 1), ("stripe", "pi_1", 2), ("stripe", "pi_1", 3)}
        state = await ordering.states(conn, [("stripe", "pi_1"), ("stripe", "pi_2")])
        assert state[("stripe", "pi_1")].applied_seq == 3
        assert state[("stripe", "pi_2")] == ordering.UNSEEN
        assert await key_moves.advance(conn, [step(3), step(5)]) == set()
        assert await key_moves.advance(conn, [step(4), step(5, outcome="deferred")]) == {
            ("stripe", "pi_1", 4),
            ("stripe", "pi_1", 5),
        }
        assert await log_of(conn) == [
            (1, "applied"), (2, "applied"), (3, "applied"), (4, "applied"), (5, "deferred")
        ]  # fmt: skip
    finally:
        await conn.close()


async def test_one_step_for_each_of_many_keys_moves_those_that_continue(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One call, one step per key (a round of the gate): a key continuing from where it
    is moves, a key's first number creates it, a held key moving to its hold is
    released; a gap, a repeat and a number past a missing first move nothing, and what
    moved is logged once in the order given per key."""
    left: list[Advance] = []
    runs_of = key_moves._advance_runs

    async def spying(conn: asyncpg.Connection, steps: list[Advance]) -> set[tuple[str, str, int]]:
        left.extend(steps)
        return await runs_of(conn, steps)

    monkeypatch.setattr(key_moves, "_advance_runs", spying)
    conn = await asyncpg.connect(database_url)
    try:
        await key_moves.advance(
            conn, [step(1, "on"), step(1, "repeat"), step(1, "held"), step(1, "gap_on")]
        )
        await ordering.hold(conn, "stripe", "held", 2, 5, "UNKNOWN_MERCHANT")
        left.clear()
        moved = await key_moves.advance(
            conn,
            [
                step(2, "on"),
                step(1, "new"),
                step(3, "gap"),
                step(1, "repeat"),
                step(2, "held"),
                step(4, "on_gap"),
                step(3, "gap_on"),
            ],
        )
        assert moved == {("stripe", "on", 2), ("stripe", "new", 1), ("stripe", "held", 2)}
        # The one statement moved those; only what it could not is tried the long way.
        assert sorted(s.order_key for s in left) == ["gap", "gap_on", "on_gap", "repeat"]
        keys = [("stripe", k) for k in ("on", "new", "gap", "repeat", "held", "on_gap", "gap_on")]
        state = await ordering.states(conn, keys)
        assert {k[1]: (s.applied_seq, s.held) for k, s in state.items()} == {
            "on": (2, False),
            "new": (1, False),
            "gap": (0, False),
            "repeat": (1, False),
            "held": (2, False),
            "on_gap": (0, False),
            "gap_on": (1, False),
        }
        assert await log_of(conn, "on") == [(1, "applied"), (2, "applied")]
        assert await log_of(conn, "repeat") == [(1, "applied")]
        assert await log_of(conn, "gap") == []
    finally:
        await conn.close()


async def test_two_transactions_moving_one_key_move_it_once(database_url: str) -> None:
    """Both copies of seq 1 (and of 2 on an existing row) try at once: one moves it."""
    a, b = await asyncpg.connect(database_url), await asyncpg.connect(database_url)
    try:
        for seq in (1, 2):
            ta, tb = a.transaction(), b.transaction()
            await ta.start()
            await tb.start()
            first = await key_moves.advance(a, [step(seq)])
            second = asyncio.create_task(key_moves.advance(b, [step(seq)]))
            await asyncio.sleep(0.2)  # b waits on a's row or insert
            assert not second.done()
            await ta.commit()
            assert first == {("stripe", "pi_1", seq)}
            assert await second == set()
            await tb.commit()
        assert await log_of(a) == [(1, "applied"), (2, "applied")]
    finally:
        await a.close()
        await b.close()


async def test_a_hold_is_released_when_the_key_moves_to_it(database_url: str) -> None:
    """Held at 2; moving to 1 keeps it, moving to 2 releases it; a key past a seq is
    not held by it, and a lower parked seq takes the hold over."""
    conn = await asyncpg.connect(database_url)
    try:
        key = ("stripe", "pi_1")
        await key_moves.advance(conn, [step(1)])
        await ordering.hold(conn, "stripe", "pi_1", 1, None, "UNKNOWN_MERCHANT")
        assert not (await ordering.states(conn, [key]))[key].held  # already past 1
        await ordering.hold(conn, "stripe", "pi_1", 4, 7, "ORDER_PREDECESSOR_MISSING")
        await ordering.hold(conn, "stripe", "pi_1", 3, 9, "UNKNOWN_MERCHANT")
        await ordering.hold(conn, "stripe", "pi_1", 5, 11, "UNKNOWN_MERCHANT")
        state = (await ordering.states(conn, [key]))[key]
        assert (state.held_seq, state.held_dlq_id, state.hold_reason) == (
            3, 9, "UNKNOWN_MERCHANT"
        )  # fmt: skip
        await key_moves.advance(conn, [step(2)])
        assert (await ordering.states(conn, [key]))[key].held_seq == 3
        await key_moves.advance(conn, [step(3)])
        state = (await ordering.states(conn, [key]))[key]
        assert (state.applied_seq, state.held, state.held_at) == (3, False, None)
        # A key first seen by its hold: held at 0.
        await ordering.hold(conn, "stripe", "pi_2", 1, 12, "UNKNOWN_MERCHANT")
        assert (await ordering.states(conn, [("stripe", "pi_2")]))[("stripe", "pi_2")].held
        assert await key_moves.advance(conn, [step(1, "pi_2")]) == {("stripe", "pi_2", 1)}
        assert not (await ordering.states(conn, [("stripe", "pi_2")]))[("stripe", "pi_2")].held
    finally:
        await conn.close()


async def test_deferrals_open_and_resolve(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await key_moves.advance(conn, [step(1, outcome="deferred"), step(2)])
        asked = [("stripe", "pi_1", 1), ("stripe", "pi_1", 2), ("stripe", "pi_1", 3)]
        assert await ordering.still_owed(conn, asked) == {("stripe", "pi_1", 1)}
        await ordering.resolve_deferral(conn, "stripe", "pi_1", 1, "settled")
        assert await ordering.still_owed(conn, asked) == set()
        row = await conn.fetchrow("SELECT resolution, resolved_at FROM order_log WHERE key_seq = 1")
        assert row is not None
        assert row["resolution"] == "settled" and row["resolved_at"] is not None
    finally:
        await conn.close()


async def test_a_parked_deferral_settled_by_a_replay_says_settled(database_url: str) -> None:
    """Parked once its retries ran out, then replayed and settled: the log says settled;
    nothing else overwrites a resolution."""
    conn = await asyncpg.connect(database_url)
    try:
        await key_moves.advance(conn, [step(1, outcome="deferred"), step(2)])
        await ordering.resolve_deferral(conn, "stripe", "pi_1", 1, "parked")
        await ordering.resolve_deferral(conn, "stripe", "pi_1", 1, "parked")
        assert await conn.fetchval("SELECT resolution FROM order_log WHERE key_seq = 1") == (
            "parked"
        )
        await ordering.resolve_deferral(conn, "stripe", "pi_1", 1, "settled")
        await ordering.resolve_deferral(conn, "stripe", "pi_1", 1, "parked")
        assert await conn.fetchval("SELECT resolution FROM order_log WHERE key_seq = 1") == (
            "settled"
        )
    finally:
        await conn.close()


async def test_release_skips_up_to_the_hold_with_the_operator(database_url: str) -> None:
    """A gap hold at 4 with 1 applied: 2, 3 and 4 are logged skipped by the operator."""
    conn = await asyncpg.connect(database_url)
    try:
        await key_moves.advance(conn, [step(1)])
        assert await ordering.release(conn, "stripe", "pi_1", "ops", "gone") is None
        await ordering.hold(conn, "stripe", "pi_1", 4, 3, "ORDER_PREDECESSOR_MISSING")
        assert await ordering.release(conn, "stripe", "pi_1", "ops", "gone") == 4
        assert await log_of(conn) == [
            (1, "applied"),
            (2, "skipped"),
            (3, "skipped"),
            (4, "skipped"),
        ]
        notes = await conn.fetch("SELECT actor, note FROM order_log WHERE outcome = 'skipped'")
        assert {(r["actor"], r["note"]) for r in notes} == {("ops", "gone")}
        state = (await ordering.states(conn, [("stripe", "pi_1")]))[("stripe", "pi_1")]
        assert (state.applied_seq, state.held) == (4, False)
        assert await key_moves.advance(conn, [step(5)]) == {("stripe", "pi_1", 5)}
    finally:
        await conn.close()
