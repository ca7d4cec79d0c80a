"""The end-to-end pass's figures and checks, from what was measured: pure functions, no
I/O (bench/e2e.py gathers the inputs). Times are wall-clock seconds (`time.time()`,
PostgreSQL's `timestamptz` and JetStream's stored timestamps, all from one machine)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.report import check


@dataclass(frozen=True)
class BurstTimes:
    """When the burst's events passed each stage, and how many did.

    `first_request_s` and `last_accepted_s` are the earliest and latest `received_at` of
    the burst's rows (the gateway stamps a request as it reads it); `last_on_stream_s`
    is the timestamp JetStream stored with the burst's last message; `last_settled_s`
    the latest `settled_at` of their settlements (set in the transaction that marks them
    settled, after their transfers were posted).
    """

    first_request_s: float
    last_accepted_s: float
    last_on_stream_s: float | None
    last_settled_s: float | None
    accepted: int  # rows the burst left (each an event the gateway accepted)
    on_stream: int
    settled: int


def _per_s(count: int, start_s: float, end_s: float | None) -> float | None:
    if end_s is None or count == 0 or end_s <= start_s:
        return None
    return round(count / (end_s - start_s), 1)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def burst_figures(
    times: BurstTimes, accepted_per_s: float, bare_rps: float | None
) -> dict[str, Any]:
    """Rates from the first request to the last of each stage, the lag after the load,
    and the ratios the targets compare. `accepted_per_s` is wrk's (answers counted
    `accepted` over wrk's own duration); `bare_rps` is the bare endpoint's new-events
    rate in the same run, if it was measured."""
    on_stream_per_s = _per_s(times.on_stream, times.first_request_s, times.last_on_stream_s)
    settled_per_s = _per_s(times.settled, times.first_request_s, times.last_settled_s)

    def lag(end_s: float | None) -> float | None:
        return None if end_s is None else round(end_s - times.last_accepted_s, 2)

    return {
        "accepted_per_s": round(accepted_per_s, 1),
        "on_stream_per_s": on_stream_per_s,
        "settled_per_s": settled_per_s,
        "stream_lag_after_load_s": lag(times.last_on_stream_s),
        "ledger_lag_after_load_s": lag(times.last_settled_s),
        "settled_over_accepted": _ratio(settled_per_s, accepted_per_s),
        "on_stream_over_accepted": _ratio(on_stream_per_s, accepted_per_s),
        "accepted_over_bare": _ratio(accepted_per_s, bare_rps),
        "on_stream_over_bare": _ratio(on_stream_per_s, bare_rps),
        "settled_over_bare": _ratio(settled_per_s, bare_rps),
        "bare_rps": bare_rps,
    }


def paced_rate(figures: dict[str, Any], share: float = 0.5) -> float:
    """The paced load's rate: `share` of what the whole chain sustained in the burst,
    the slowest of accepted/s, on-stream/s and settled/s (pacing at half of accepted/s
    while settlement keeps up with less would measure a growing backlog, not latency)."""
    keys = ("accepted_per_s", "on_stream_per_s", "settled_per_s")
    rates = [float(figures[k]) for k in keys if figures.get(k)]
    if not rates:
        raise ValueError("the burst measured no rate to pace at")
    return max(1.0, round(share * min(rates), 1))


def cpu_per_event_us(cpu: dict[str, Any], events: int) -> dict[str, float | None]:
    """CPU µs per settled event of each process family, from a `CpuMeter` reading
    (percent of one core over `elapsed_s`)."""
    us_per_pct = 1e6 * float(cpu["elapsed_s"]) / 100
    return {
        key.removesuffix("_pct"): (
            None if value is None or not events else round(value * us_per_pct / events, 1)
        )
        for key, value in cpu.items()
        if key.endswith("_pct")
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q`-th percentile (0 < q <= 100) of `values`, None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def latency_figures(
    due_s: Sequence[float],
    sent_s: Sequence[float],
    answered_s: Sequence[float],
    settled_s: Sequence[float | None],
) -> dict[str, Any]:
    """Webhook-to-settled latency of the paced load, from each request's due time (open
    loop: a request that had to wait to be sent counts its wait), and the answers' and
    the sending's own delays. Requests that failed (answered 0) are left out; settled
    None means the event's settlement was not found."""
    answered = [i for i, a in enumerate(answered_s) if a]
    settled = [s - due_s[i] for i in answered if (s := settled_s[i]) is not None]
    answer = [answered_s[i] - due_s[i] for i in answered]
    late = [sent_s[i] - due_s[i] for i in answered]
    return {
        "events": len(due_s),
        "answered": len(answered),
        "settled": len(settled),
        "webhook_to_settled_ms": {
            "p50": _ms(percentile(settled, 50)),
            "p99": _ms(percentile(settled, 99)),
            "max": _ms(max(settled, default=None)),
        },
        "answer_ms": {"p50": _ms(percentile(answer, 50)), "p99": _ms(percentile(answer, 99))},
        "send_delay_ms": {"p99": _ms(percentile(late, 99)), "max": _ms(max(late, default=None))},
    }


@dataclass(frozen=True)
class LedgerFacts:
    """What the database and the ledger hold at the end of the pass."""

    rows: int  # processed_webhooks rows
    accepted_answers: int  # the gateway's own count of `accepted` answers
    wrk_accepted: int  # `accepted` answers wrk and the paced load read
    unanswered: int  # requests sent whose answer was never read (wrk at its stop)
    stream_messages: int
    settlements: int
    settled: int
    settlement_rows_matched: int  # settlements whose source event is a row
    transfers: int | None  # ledger_transfers (PostgreSQL ledger only)
    dlq_rows: int
    accepted_amount_minor: int  # the sum of `amount_received` over the rows' bodies
    merchant_credits_minor: int  # the merchant's credits, read through the ledger
    merchant_debits_minor: int
    ledger_debits: int  # totals over all accounts, through the ledger's check()
    ledger_credits: int


def end_to_end_checks(facts: LedgerFacts) -> list[dict[str, Any]]:
    """The ledger holds exactly the accepted payments, and each stage one of each."""
    f = facts
    transfers = f.settled if f.transfers is None else f.transfers
    return [
        check(
            "rows within the 'accepted' answers read (+ unanswered at wrk's stop)",
            f.wrk_accepted <= f.rows <= f.wrk_accepted + f.unanswered,
            f"{f.rows:,} rows; {f.wrk_accepted:,} 'accepted' read; {f.unanswered} unanswered",
        ),
        check(
            "one row per accepted event (gateway_webhooks_total)",
            f.rows == f.accepted_answers,
            f"{f.rows:,} rows; {f.accepted_answers:,} 'accepted' answers given",
        ),
        check(
            "one stream message per row",
            f.stream_messages == f.rows,
            f"{f.stream_messages:,} messages, {f.rows:,} rows",
        ),
        check(
            "one settled settlement per row",
            f.settled == f.settlements == f.settlement_rows_matched == f.rows,
            f"{f.settled:,} settled of {f.settlements:,} settlements, "
            f"{f.settlement_rows_matched:,} of them for a row; {f.rows:,} rows",
        ),
        check(
            "one transfer per accepted payment",
            transfers == f.rows,
            f"{transfers:,} transfers"
            + (" (settled settlements; the ledger has no count)" if f.transfers is None else "")
            + f", {f.rows:,} rows",
        ),
        check("no dead letters", f.dlq_rows == 0, f"{f.dlq_rows} DLQ rows"),
        check(
            "ledger balanced",
            f.ledger_debits == f.ledger_credits,
            f"debits {f.ledger_debits:,}, credits {f.ledger_credits:,}",
        ),
        check(
            "the merchant holds the accepted amounts, once",
            f.merchant_credits_minor - f.merchant_debits_minor == f.accepted_amount_minor,
            f"{f.merchant_credits_minor - f.merchant_debits_minor:,} in the ledger, "
            f"{f.accepted_amount_minor:,} accepted",
        ),
    ]
