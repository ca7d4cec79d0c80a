"""The loss/duplicate audit of one load run, as the chaos issue defines it.

For every event that got a 2xx:
- exactly one `processed_webhooks` row, published (JetStream's PubAck recorded) and, when
  the stream is read, present in it;
- settling events: exactly one ledger transfer, or none and an open dead letter with a
  reason; an event with neither is lost, one with two or more transfers is doubled.

And for the run as a whole: no ledger transfer for an event that never got a 2xx (nor a
row for a forged one), no event answered `accepted` twice, `gateway ledger check`
passes, and the ordering property holds over every key (settlement applied each key's
events in sequence, every gap explained: tests/support/ordering_property.py). Figures:
attempts sent, accepted, duplicate, rejected by status, lost, doubled, time to drain,
the keys the property was checked over and those that break it. Printed as a table and
written as JSON.

    python -m chaos.audit --config gateway.toml --load load.json [--json audit.json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from chaos.loadgen import LoadRecord
from chaos.observe import Observed, observe
from chaos.workload import PlannedEvent
from gateway.core.ledger.port import TransferCode

_SHOWN = 12  # problems listed by name; the counts cover all of them


def transfer_key(event: PlannedEvent) -> tuple[str, int]:
    code = TransferCode.REFUND if event.kind == "refund" else TransferCode.CAPTURE
    return (event.settlement_id or "", int(code))


@dataclass
class AuditResult:
    """The verdict and the figures behind it."""

    scenario: str
    figures: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        f = self.figures
        return bool(
            f["lost"] == f["doubled"] == f["phantom"] == 0
            and f["ledger_balanced"]
            and f.get("order_violations", 0) == 0
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "ok": self.ok,
            "figures": self.figures,
            "problems": self.problems,
        }

    def table(self) -> str:
        rows = [(k, format_value(v)) for k, v in self.figures.items()]
        width = max(len(k) for k, _ in rows)
        lines = [
            f"audit: {self.scenario}: {'PASS' if self.ok else 'FAIL'}",
            f"| {'figure':<{width}} | value |",
            f"|{'-' * (width + 2)}|-------|",
        ]
        lines += [f"| {k:<{width}} | {v} |" for k, v in rows]
        lines += [f"  ! {p}" for p in self.problems[:_SHOWN]]
        if len(self.problems) > _SHOWN:
            lines.append(f"  ! ... and {len(self.problems) - _SHOWN} more")
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2))


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in sorted(value.items(), key=str)) or "-"
    return str(value)


def _outcome(e: PlannedEvent, seen: Observed) -> tuple[str, list[str]]:
    """What became of one accepted event: its settlement outcome and why it is lost, if so."""
    key = (e.provider, e.event_id)
    published = seen.rows.get(key)
    if published is None:
        return "none", ["got a 2xx but has no row"]
    reasons = [] if published else ["its row was never published"]
    if seen.stream is not None and published and not seen.stream[key]:
        reasons.append("is not in the stream")
    if not e.settles:
        return "n/a", reasons
    transfers, letters = seen.transfers[transfer_key(e)], seen.open_dlq.get(key, [])
    if transfers > 1:
        return "doubled", reasons
    if transfers == 1:
        return "settled", reasons
    if letters and all(d.error_class and d.error_message for d in letters):
        return "parked", reasons
    return "none", [*reasons, "has no transfer and no dead letter with a reason"]


def judge(
    scenario: str, record: LoadRecord, seen: Observed, *, drain_s: float | None = None
) -> AuditResult:
    """Pure: the verdict on a run from its load record and what the stores hold."""
    problems: list[str] = []
    two_xx: Counter[int] = Counter()
    accepted: Counter[int] = Counter()
    rejected: Counter[str] = Counter()
    for a in record.answers:
        if 200 <= a.status < 300:
            two_xx[a.event] += 1
            accepted[a.event] += a.outcome == "accepted"
        else:
            rejected[str(a.status or "no_answer")] += 1
    outcomes: Counter[str] = Counter()
    parked_by: Counter[str] = Counter()
    lost = doubled = phantom = unexpected_parked = missing = 0
    expected: set[tuple[str, int]] = set()
    for e in record.events:
        name = f"{e.kind} {e.provider}:{e.event_id}"
        if not two_xx[e.index]:
            if e.kind == "forged" and (e.provider, e.event_id) in seen.rows:
                phantom += 1
                problems.append(f"phantom: {name} was refused but recorded")
            continue
        if accepted[e.index] > 1:
            doubled += 1
            problems.append(f"doubled: {name} answered 'accepted' {accepted[e.index]} times")
        if e.settles:
            expected.add(transfer_key(e))
        outcome, reasons = _outcome(e, seen)
        outcomes[outcome] += 1
        missing += "is not in the stream" in reasons
        if reasons:
            lost += 1
            problems.append(f"lost: {name} " + "; ".join(reasons))
        if outcome == "doubled":
            doubled += 1
            problems.append(f"doubled: {name} has {seen.transfers[transfer_key(e)]} transfers")
        elif outcome == "parked":
            parked_by[seen.open_dlq[(e.provider, e.event_id)][0].error_class] += 1
            unexpected_parked += not e.expect_parked
    for tkey, count in seen.transfers.items():
        if tkey not in expected:
            phantom += count
            problems.append(f"phantom: transfer for {tkey[0]} (code {tkey[1]}) without a 2xx event")
    if not seen.ledger_ok:
        problems.append(f"ledger check failed: {seen.ledger_text}")
    problems += [f"order: {line}" for line in seen.order_violations or []]
    ok_answers = [a for a in record.answers if 200 <= a.status < 300]
    figures: dict[str, Any] = {
        "events": len(record.events),
        # Scenario 12 adds one synthetic answer ("backfill") per event only the provider's
        # API had: owed by the gateway, but never sent.
        "sent": sum(1 for a in record.answers if a.outcome != "backfill"),
        "accepted": sum(accepted.values()),
        "duplicate": sum(1 for a in ok_answers if a.outcome == "duplicate"),
        "rejected": dict(rejected),
        "events_2xx": sum(1 for e in record.events if two_xx[e.index]),
        "never_2xx": sum(1 for e in record.events if not two_xx[e.index] and e.kind != "forged"),
        "settling_2xx": sum(1 for e in record.events if e.settles and two_xx[e.index]),
        "settled": outcomes["settled"],
        "parked": dict(parked_by),
        "unexpected_parked": unexpected_parked,
        "missing_from_stream": missing,
        "lost": lost,
        "doubled": doubled,
        "phantom": phantom,
        "ledger_balanced": seen.ledger_ok,
        "ledger_check": seen.ledger_text,
        # The ordering property, over every key of the database: keys checked (0 when no
        # event carried a key: trivially true), keys breaking it, keys held by a parked
        # event, and keys whose last numbered event is not applied yet.
        "order_keys": seen.ordering.keys if seen.ordering else "-",
        "order_violations": len(seen.order_violations or []),
        "order_held": seen.ordering.held if seen.ordering else "-",
        "order_behind": seen.ordering.behind if seen.ordering else "-",
        "load_s": record.duration_s,
        "drain_s": drain_s if drain_s is not None else "-",
    }
    return AuditResult(scenario, figures, problems)


async def audit(
    scenario: str,
    record: LoadRecord,
    *,
    database_url: str,
    nats_url: str | None,
    config_path: Path,
    drain_s: float | None = None,
    json_path: Path | None = None,
    quiet: bool = False,
) -> AuditResult:
    """Observe the stores, judge the run, print the table and write the JSON."""
    seen = await observe(
        run=record.run, database_url=database_url, nats_url=nats_url, config_path=config_path
    )
    result = judge(scenario, record, seen, drain_s=drain_s)
    if not quiet:
        print(result.table(), flush=True)
    if json_path is not None:
        result.write(json_path)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.audit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, required=True, help="the gateway's TOML config")
    parser.add_argument("--load", type=Path, required=True, help="the load generator's record")
    parser.add_argument("--database-url", help="default: the config's database.url")
    parser.add_argument("--nats-url", help="default: the config's nats.url")
    parser.add_argument("--no-stream", action="store_true", help="do not read the stream")
    parser.add_argument("--scenario", default="manual")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    from gateway import settings as settings_mod

    settings = settings_mod.load(args.config)
    result = asyncio.run(
        audit(
            args.scenario,
            LoadRecord.load(args.load),
            database_url=args.database_url or settings.database_url,
            nats_url=None if args.no_stream else (args.nats_url or settings.nats.url),
            config_path=args.config,
            json_path=args.json,
        )
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
