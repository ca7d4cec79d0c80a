"""Targets, ratios and the printed table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RUN_TITLES = {
    "bare": "(a) bare Starlette",
    "batching": "(b) gateway, group commit",
    "no_batching": "(c) gateway, batching off",
    "prefilled": "(b) on a prefilled table",
    "retention": "(b) with expired payloads",
    "end_to_end": "(e) serve + settle, end to end",
}
PASS_TITLES = {
    "new": "new events",
    "duplicates": "duplicates",
    "during_retention": "new, retention running",
}


@dataclass(frozen=True)
class Target:
    """One figure from issues 6 and 14 and whether this run met it (reported, never
    asserted); `ok` is None for a figure not measured, or one with no goal."""

    name: str
    goal: str
    value: float | None
    ok: bool | None  # None: not measured in this run

    def as_dict(self) -> dict[str, Any]:
        if self.ok is None:
            status = "n/a" if self.value is None or self.goal != "reported" else "reported"
        else:
            status = "pass" if self.ok else "FAIL"
        value = None if self.value is None else round(self.value, 3)
        return {"name": self.name, "goal": self.goal, "value": value, "status": status}


def check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    """One correctness check of a run, as results.json records it."""
    return {"check": name, "ok": ok, "detail": detail}


def _rps(runs: dict[str, Any], run: str, pass_name: str) -> float | None:
    found = runs.get(run, {}).get(pass_name)
    return None if found is None else float(found["rps"])


def _p99(runs: dict[str, Any], run: str, pass_name: str) -> float | None:
    found = runs.get(run, {}).get(pass_name)
    return None if found is None else float(found["latency_ms"]["p99"])


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def ratios(runs: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for pass_name in ("new", "duplicates"):
        b = _rps(runs, "batching", pass_name)
        for other, key in (("bare", "b_over_a"), ("no_batching", "b_over_c")):
            out[f"{key}_{pass_name}"] = _ratio(b, _rps(runs, other, pass_name))
    # The same server on a large table against an empty one, and p99 while
    # retention removes against the same server's pass just before (and against (b)).
    for pass_name in ("new", "duplicates"):
        out[f"prefilled_over_empty_{pass_name}"] = _ratio(
            _rps(runs, "prefilled", pass_name), _rps(runs, "batching", pass_name)
        )
    for key, run, pass_name in (
        ("retention_p99_over_without", "retention", "new"),
        ("retention_p99_over_b", "batching", "new"),
    ):
        out[key] = _ratio(_p99(runs, "retention", "during_retention"), _p99(runs, run, pass_name))
    out["prefilled_over_empty_p99_new"] = _ratio(
        _p99(runs, "prefilled", "new"), _p99(runs, "batching", "new")
    )
    return out


def _at_least(name: str, value: float | None, goal: float) -> Target:
    return Target(name, f">= {goal}", value, None if value is None else value >= goal)


def _at_most(name: str, value: float | None, goal: float) -> Target:
    return Target(name, f"<= {goal:g}", value, None if value is None else value <= goal)


def storage_targets(runs: dict[str, Any]) -> list[Target]:
    """The storage figures that come from the prefilled and retention runs."""
    ratio = ratios(runs)
    rows = runs.get("prefilled", {}).get("prefill", {}).get("rows")
    within = ratio["prefilled_over_empty_new"]
    found = [
        Target(
            f"(b) new events, {f'{rows:,}' if rows else 'N'} rows stored / empty table",
            "within 10 %",
            within,
            None if within is None else abs(within - 1) <= 0.10,
        ),
        _at_most(
            "p99 while retention empties payloads / without (same server)",
            ratio["retention_p99_over_without"],
            1.5,
        ),
    ]
    prefilled = runs.get("prefilled", {}).get("storage", {})
    removed = runs.get("retention", {}).get("storage", {})
    for title, where, key in (
        (
            "disk bytes per stored event (table, TOAST, indexes), prefilled table",
            prefilled,
            "after_passes",
        ),
        (
            "the same, payloads emptied by retention, after VACUUM (all rows)",
            removed,
            "after_retention_vacuum",
        ),
        (
            "the same, emptied rows alone after VACUUM FULL",
            removed,
            "after_vacuum_full",
        ),
    ):
        value = where.get(key, {}).get("bytes_per_row")
        found.append(Target(title, "reported", value, None))
    return found


def targets(
    runs: dict[str, Any],
    ratio: dict[str, float | None],
    memory: dict[str, Any] | None,
    settlement: dict[str, Any] | None = None,
    numbering: dict[str, Any] | None = None,
) -> list[Target]:
    pg_us = runs.get("batching", {}).get("new", {}).get("postgres_cpu_us_per_new_row")
    found = [
        _at_most("(b) PostgreSQL CPU per accepted new event (µs, cluster)", pg_us, 30.0),
        _at_least("(b)/(a) new events", ratio["b_over_a_new"], 0.5),
        _at_least("(b)/(a) duplicates", ratio["b_over_a_duplicates"], 0.65),
        _at_least("(b)/(c) new events", ratio["b_over_c_new"], 3.0),
    ]
    for pass_name, title in (("new", "new events"), ("duplicates", "duplicates")):
        p99 = runs.get("batching", {}).get(pass_name, {}).get("latency_ms", {}).get("p99")
        found.append(
            Target(
                f"(b) p99 at 64 connections, {title}",
                "<= 20 ms",
                p99,
                None if p99 is None else p99 <= 20.0,
            )
        )
    lag = runs.get("batching", {}).get("new", {}).get("loop_lag") or {}
    found.append(_at_most("(b) event-loop lag p99, new events (ms)", lag.get("p99_ms"), 10.0))
    cpu_a = runs.get("bare", {}).get("new", {}).get("server_cpu_us_per_request")
    cpu_b = runs.get("batching", {}).get("new", {}).get("server_cpu_us_per_request")
    found.append(_at_most("(b)/(a) server CPU per new event", _ratio(cpu_b, cpu_a), 2.0))
    for key, title in (
        ("growth_pct", "RSS after the soak vs after warm-up (%)"),
        ("growth_drained_pct", "the same, once the outbox drained (%)"),
    ):
        growth = None if memory is None else memory.get(key)
        found.append(
            Target(title, "within 10 %", growth, None if growth is None else abs(growth) <= 10)
        )
    drained = (settlement or {}).get("events_per_s")
    found.append(
        _at_least("settlement drain alone, PostgreSQL ledger (events/s)", drained, 10_000.0)
    )
    over = (numbering or {}).get("most_over_unkeyed_us")
    found.append(_at_most("ingest numbering: keyed over unkeyed, PostgreSQL CPU (µs)", over, 10.0))
    return found + end_to_end_targets(runs) + storage_targets(runs)


def end_to_end_targets(runs: dict[str, Any]) -> list[Target]:
    """The back office against the front door: the end-to-end run's figures, and the
    outbox drain after (b)'s new-events pass."""
    burst = runs.get("end_to_end", {}).get("burst", {})
    paced = runs.get("end_to_end", {}).get("paced", {})
    drain_s = runs.get("batching", {}).get("after_new", {}).get("outbox_drain_s")
    return [
        _at_least("(e) settled/s / accepted/s, burst", burst.get("settled_over_accepted"), 0.9),
        _at_most("(e) ledger lag after the burst (s)", burst.get("ledger_lag_after_load_s"), 3.0),
        _at_most("(b) outbox drain after the new-events pass (s)", drain_s, 2.0),
        _at_most(
            "(e) webhook -> settled p99 at half capacity (ms)",
            paced.get("webhook_to_settled_ms", {}).get("p99"),
            1000.0,
        ),
        Target("(e) accepted/s / (a)", "reported", burst.get("accepted_over_bare"), None),
        Target("(e) settled/s / (a)", "reported", burst.get("settled_over_bare"), None),
    ]


def end_to_end_lines(runs: dict[str, Any]) -> str:
    """The end-to-end run's stages, beside the bare endpoint, and its paced latency."""
    e = runs.get("end_to_end")
    if e is None:
        return ""
    b, p = e["burst"], e["paced"]
    bare = b.get("bare_rps")
    lines = [
        f"| {RUN_TITLES['end_to_end']}: stage | rate /s | vs (a) ({_fmt(bare, 0)} req/s) "
        "| lag after the load, s |",
        "|---|---:|---:|---:|",
        f"| accepted (2xx after commit) | {_fmt(b['accepted_per_s'], 0)} "
        f"| {_fmt(b['accepted_over_bare'], 2)} | |",
        f"| on the stream | {_fmt(b['on_stream_per_s'], 0)} | {_fmt(b['on_stream_over_bare'], 2)} "
        f"| {_fmt(b['stream_lag_after_load_s'], 2)} |",
        f"| settled in the ledger | {_fmt(b['settled_per_s'], 0)} "
        f"| {_fmt(b['settled_over_bare'], 2)} | {_fmt(b['ledger_lag_after_load_s'], 2)} |",
        "",
        f"  {b['events']:,} events in the burst; settled/accepted "
        f"{_fmt(b['settled_over_accepted'], 2)}; CPU µs per settled event: "
        + ", ".join(f"{k} {_fmt(v, 0)}" for k, v in b["cpu_us_per_event"].items()),
        f"  paced at {_fmt(p['rate_per_s'], 0)}/s for {p['seconds']} s: webhook -> settled p50 "
        f"{_fmt(p['webhook_to_settled_ms']['p50'])} ms, p99 "
        f"{_fmt(p['webhook_to_settled_ms']['p99'])} ms ({p['settled']:,} of {p['events']:,} "
        f"settled); answers p99 {_fmt(p['answer_ms']['p99'])} ms",
    ]
    lines += [f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}" for c in e["checks"]]
    return "\n".join(lines)


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
        "| accepted | duplicate | server CPU % | relay CPU % | server CPU µs/req "
        "| PostgreSQL CPU µs/new row | event-loop lag p99 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
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
                f"| {_fmt(r['server_cpu_us_per_request'], 0)} "
                f"| {_fmt(r.get('postgres_cpu_us_per_new_row'), 0)} "
                f"| {_fmt((r.get('loop_lag') or {}).get('p99_ms'), 2)} |"
            )
    return "\n".join(lines)


def ratio_lines(ratio: dict[str, float | None]) -> str:
    names = {
        "b_over_a_new": "(b)/(a) new events",
        "b_over_a_duplicates": "(b)/(a) duplicates",
        "b_over_c_new": "(b)/(c) new events",
        "b_over_c_duplicates": "(b)/(c) duplicates",
        "prefilled_over_empty_new": "prefilled/empty new events req/s",
        "prefilled_over_empty_duplicates": "prefilled/empty duplicates req/s",
        "prefilled_over_empty_p99_new": "prefilled/empty new events p99",
        "retention_p99_over_without": "p99 with/without retention (same server)",
        "retention_p99_over_b": "p99 with retention / (b) on an empty table",
    }
    return "\n".join(
        f"  {names.get(k, k):<42} {_fmt(v, 2)}"
        for k, v in ratio.items()
        if v is not None or k.startswith("b_over")
    )


def target_table(found: list[Target]) -> str:
    lines = ["| target | goal | measured | result |", "|---|---|---:|---|"]
    for t in found:
        d = t.as_dict()
        lines.append(f"| {d['name']} | {d['goal']} | {_fmt(d['value'], 2)} | {d['status']} |")
    return "\n".join(lines)


def storage_lines(runs: dict[str, Any]) -> str:
    """Prefill, retention and table sizes of the prefilled and retention runs."""
    lines = []
    for run in ("prefilled", "retention"):
        r = runs.get(run)
        if r is None:
            continue
        pre = r["prefill"]
        lines.append(
            f"  {RUN_TITLES[run]}: prefilled {pre['rows']:,} rows in {pre['insert_s']} s "
            f"({pre['rows_per_s']:,} rows/s), VACUUM (ANALYZE) + CHECKPOINT "
            f"{pre['vacuum_analyze_checkpoint_s']} s"
        )
        for key, size in r["storage"].items():
            if isinstance(size, dict):
                lines.append(
                    f"    {key.replace('_', ' ')}: {size['total_bytes'] / 2**20:,.0f} MiB "
                    f"(heap {size['heap_bytes'] / 2**20:,.0f}, TOAST "
                    f"{size['toast_bytes'] / 2**20:,.0f}, indexes "
                    f"{size['index_bytes'] / 2**20:,.0f}) for {size['rows']:,} rows: "
                    f"{_fmt(size['bytes_per_row'])} bytes per row"
                )
        ret = r.get("retention")
        if ret:
            lines.append(
                f"    retention: {ret['emptied_during_pass']:,} payloads emptied during the "
                f"{ret['pass_s']} s pass ({ret['rows_per_s_during_pass']:,} rows/s); "
                + (
                    f"{ret['emptied_total']:,} in all at {ret['rows_per_s_overall']:,} rows/s"
                    if ret["finished"]
                    else "did not finish"
                )
                + (f"; note: {ret['note']}" if ret["note"] else "")
            )
    return "\n".join(lines)
