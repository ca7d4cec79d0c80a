"""`python -m gateway.devtools.docs_reference [--check] [--docs DIR]`: rewrite the
generated reference pages, or (`--check`) exit 1 naming those that are stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.devtools.docs_reference import DOCS_DIR, stale, write_all


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateway.devtools.docs_reference",
        description="Generate the documentation's reference pages from the code.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and name the pages that differ from the code",
    )
    parser.add_argument(
        "--docs", type=Path, default=DOCS_DIR, help="the docs directory (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.check:
        outdated = stale(args.docs)
        for path in outdated:
            print(f"stale: docs/{path} (run python -m gateway.devtools.docs_reference)")
        return 1 if outdated else 0
    for path in write_all(args.docs):
        print(f"wrote docs/{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
