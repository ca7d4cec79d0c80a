"""Pages of the dead-letter list: the keyset cursor, the page size, and how a count
capped for cheapness is shown. Pure.

A page is the rows after a position in the list's order, (first_failed_at, id), the
order `gateway dlq list` prints: the cursor is that position, opaque to the client
(`core.keyset`, as every console list), and never an offset, so a deep page costs what
the first one does and rows added meanwhile neither repeat nor go missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core import keyset
from gateway.core.dlq.model import RowBrief
from gateway.core.keyset import BadCursor, Keyset
from gateway.errors import DlqUsageError

#: Rows per page when none is asked for, and the most one page may hold.
DEFAULT_PAGE_ROWS = 50
MAX_PAGE_ROWS = 500
#: Counting stops here: past it the page says "10,000+" instead of reading every row.
COUNT_CAP = 10_000
#: The longest a console page's statements may read. A text search (no index holds
#: the messages) or a rare class reads the table until a page fills: over 1 M open
#: rows a search that matches almost nothing took 1.5 s; past this bound it is
#: refused with a line asking for a narrower filter, rather than holding a connection.
LIST_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class DlqPage:
    """One page of the list and what is beyond it."""

    rows: list[RowBrief]
    next_after: Keyset | None  # None: this is the last page
    total: int  # matching rows, counted up to COUNT_CAP + 1
    capped: bool  # more than COUNT_CAP match

    @property
    def total_text(self) -> str:
        """How many match, as a page says it: `1,234`, or `10,000+` past the cap."""
        return f"{COUNT_CAP:,}+" if self.capped else f"{self.total:,}"


def encode_cursor(after: Keyset) -> str:
    """The opaque `cursor` of the page after `after` (first_failed_at, id)."""
    return keyset.encode_cursor(after)


def decode_cursor(cursor: str | None) -> Keyset | None:
    """The position a cursor names; None for none; `DlqUsageError` for one this console
    did not give out (edited, truncated, or from another list)."""
    if cursor is None or not cursor.strip():
        return None
    try:
        return keyset.decode_cursor(cursor.strip())
    except BadCursor as exc:
        raise DlqUsageError(str(exc)) from None


def page_rows(text: str | None) -> int:
    """`limit`: rows per page, 1 to MAX_PAGE_ROWS; the default when absent."""
    if text is None or not text.strip():
        return DEFAULT_PAGE_ROWS
    value = text.strip()
    if not (
        len(value) <= 9 and value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_PAGE_ROWS
    ):
        raise DlqUsageError(f"limit: a whole number from 1 to {MAX_PAGE_ROWS}")
    return int(value)
