"""Print the scenarios' audit results as Markdown tables (for chaos/README.md).

    python -m chaos.report [--results .data/chaos] [--full DIR]

Each scenario gets one table, the fast variant's figures beside the full variant's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from chaos.audit import format_value

_SKIP = {"ledger_check"}


def load(directory: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: orjson.loads(p.read_bytes()) for p in sorted(directory.glob("*.json"))}


def table(columns: dict[str, dict[str, Any]]) -> str:
    names = list(columns)
    figures = [k for k in next(iter(columns.values()))["figures"] if k not in _SKIP]
    lines = ["| figure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    verdicts = ["**PASS**" if columns[n]["ok"] else "**FAIL**" for n in names]
    lines.append("| audit | " + " | ".join(verdicts) + " |")
    for key in figures:
        cells = [format_value(columns[n]["figures"].get(key, "-")) for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.report", description=__doc__)
    parser.add_argument("--results", type=Path, default=Path(".data/chaos"))
    parser.add_argument("--full", type=Path, help="another directory with the full variants")
    args = parser.parse_args()
    results = load(args.results) | (load(args.full) if args.full else {})
    scenarios = sorted({name.split("-")[0] for name in results if name.startswith("s")})
    for scenario in scenarios:
        columns = {
            name.removeprefix(scenario + "-"): results[name]
            for name in sorted(results, key=lambda n: ("full" in n, "before" not in n))
            if name.split("-")[0] == scenario
        }
        print(f"#### {scenario}\n\n{table(columns)}\n")


if __name__ == "__main__":
    main()
