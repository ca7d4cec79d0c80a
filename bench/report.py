"""Targets, ratios and the printed table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RUN_TITLES = {
    "bare": "(a) bare Starlette",
    "batching": "(b) gateway, group commit",
    "no_batching": "(c) gateway, batching off",
}
PASS_TITLES = {"new": "new events", "duplicates": "duplicates"}


@dataclass(frozen=True)
class Target:
    """One figure from issue 6 and whether this run met it (reported, never asserted)."""

    name: str
    goal: str
    value: float | None
    ok: bool | None  # None: not measured in this run

    def as_dict(self) -> dict[str, Any]:
        status = "n/a" if self.ok is None else ("pass" if self.ok else "FAIL")
        value = None if self.value is None else round(self.value, 3)
        return {"name": self.name, "goal": self.goal, "value": value, "status": status}


def check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    """One correctness check of a run, as results.json records it."""
    return {"check": name, "ok": ok, "detail": detail}


def _rps(runs: dict[str, Any], run: str, pass_name: str) -> float | None:
    found = runs.get(run, {}).get(pass_name)
    return None if found is None else float(found["rps"])


def ratios(runs: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for pass_name in PASS_TITLES:
        b = _rps(runs, "batching", pass_name)
        for other, key in (("bare", "b_over_a"), ("no_batching", "b_over_c")):
            o = _rps(runs, other, pass_name)
            out[f"{key}_{pass_name}"] = round(b / o, 3) if b and o else None
    return out


def _at_least(name: str, value: float | None, goal: float) -> Target:
    return Target(name, f">= {goal}", value, None if value is None else value >= goal)


def targets(
    runs: dict[str, Any],
    ratio: dict[str, float | None],
    memory: dict[str, Any] | None,
    settlement: dict[str, Any] | None = None,
) -> list[Target]:
    found = [
        _at_least("(b)/(a) new events", ratio["b_over_a_new"], 0.5),
        _at_least("(b)/(a) duplicates", ratio["b_over_a_duplicates"], 0.6),
        _at_least("(b)/(c) new events", ratio["b_over_c_new"], 3.0),
    ]
    for pass_name, title in PASS_TITLES.items():
        p99 = runs.get("batching", {}).get(pass_name, {}).get("latency_ms", {}).get("p99")
        found.append(
            Target(
                f"(b) p99 at 64 connections, {title}",
                "<= 25 ms",
                p99,
                None if p99 is None else p99 <= 25.0,
            )
        )
    for key, title in (
        ("growth_pct", "RSS after the soak vs after warm-up (%)"),
        ("growth_drained_pct", "the same, once the outbox drained (%)"),
    ):
        growth = None if memory is None else memory.get(key)
        found.append(
            Target(title, "within 10 %", growth, None if growth is None else abs(growth) <= 10)
        )
    drained = (settlement or {}).get("events_per_s")
    found.append(_at_least("settlement drain of 50,000 events (events/s)", drained, 3000.0))
    return found


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(runs: dict[str, Any]) -> str:
    """The side-by-side results as a Markdown table (pasted into the README as is)."""
    lines = [
        "| server | pass | req/s | p50 ms | p99 ms | socket errors + timeouts | non-2xx "
        "| accepted | duplicate | server CPU % | relay CPU % | server CPU µs/req |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run, title in RUN_TITLES.items():
        for pass_name, pass_title in PASS_TITLES.items():
            r = runs.get(run, {}).get(pass_name)
            if r is None:
                continue
            lines.append(
                f"| {title} | {pass_title} | {_fmt(r['rps'], 0)} "
                f"| {_fmt(r['latency_ms']['p50'], 2)} | {_fmt(r['latency_ms']['p99'], 2)} "
                f"| {_fmt(r['socket_errors'] + r['timeouts'])} | {_fmt(r['non_2xx'])} "
                f"| {_fmt(r['accepted'])} | {_fmt(r['duplicate'])} "
                f"| {_fmt(r['cpu'].get('server_pct'), 0)} "
                f"| {_fmt(r['cpu'].get('relay_pct'), 0)} "
                f"| {_fmt(r['server_cpu_us_per_request'], 0)} |"
            )
    return "\n".join(lines)


def ratio_lines(ratio: dict[str, float | None]) -> str:
    names = {
        "b_over_a_new": "(b)/(a) new events",
        "b_over_a_duplicates": "(b)/(a) duplicates",
        "b_over_c_new": "(b)/(c) new events",
        "b_over_c_duplicates": "(b)/(c) duplicates",
    }
    return "\n".join(f"  {names[k]:<22} {_fmt(v, 2)}" for k, v in ratio.items())


def target_table(found: list[Target]) -> str:
    lines = ["| target | goal | measured | result |", "|---|---|---:|---|"]
    for t in found:
        d = t.as_dict()
        lines.append(f"| {d['name']} | {d['goal']} | {_fmt(d['value'], 2)} | {d['status']} |")
    return "\n".join(lines)
