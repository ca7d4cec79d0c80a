"""Markdown pieces the reference pages share: escaping, table rows and the header that
marks a page as generated."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

#: Characters Markdown would read as markup in running text taken from the code.
_MARKUP = re.compile(r"([\\`*_\[\]|<>])")


def generated_header(source: str) -> str:
    """The comment that opens every generated page (invisible on the site)."""
    return (
        f"<!-- Generated from {source} by `python -m gateway.devtools.docs_reference`: "
        "edit the code, not this page. -->\n\n"
    )


def escape(text: str) -> str:
    """Plain text (argparse help, say) as Markdown that shows it exactly."""
    return _MARKUP.sub(r"\\\1", " ".join(text.split()))


def cell(text: str) -> str:
    """Markdown text made safe for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; the cells are Markdown already (see `cell`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
