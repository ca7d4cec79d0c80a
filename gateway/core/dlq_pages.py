"""Pages of the dead-letter list: the keyset cursor, the page size, and how a count
capped for cheapness is shown. Pure.

A page is the rows after a position in the list's order, (first_failed_at, id), the
order `gateway dlq list` prints: the cursor is that position, opaque to the client (url-
safe base64), and never an offset, so a deep page costs what the first one does and rows
added meanwhile neither repeat nor go missing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.core.dlq_model import RowBrief
from gateway.core.operator_input import MAX_ROW_ID
from gateway.errors import DlqUsageError

#: Rows per page when none is asked for, and the most one page may hold.
DEFAULT_PAGE_ROWS = 50
MAX_PAGE_ROWS = 500
#: Counting stops here: past it the page says "10,000+" instead of reading every row.
COUNT_CAP = 10_000


@dataclass(frozen=True)
class Position:
    """Where a page starts: after the row failing first at `first_failed_at` with `id`."""

    first_failed_at: datetime
    id: int


@dataclass(frozen=True)
class DlqPage:
    """One page of the list and what is beyond it."""

    rows: list[RowBrief]
    next_after: Position | None  # None: this is the last page
    total: int  # matching rows, counted up to COUNT_CAP + 1
    capped: bool  # more than COUNT_CAP match

    @property
    def total_text(self) -> str:
        """How many match, as a page says it: `1,234`, or `10,000+` past the cap."""
        return f"{COUNT_CAP:,}+" if self.capped else f"{self.total:,}"


def encode_cursor(after: Position) -> str:
    """The opaque `cursor` of the page after `after`."""
    text = f"{after.first_failed_at.astimezone(UTC).isoformat()}|{after.id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Position | None:
    """The position a cursor names; None for none; `DlqUsageError` for one this list
    did not give out (edited, truncated, or from another list)."""
    if cursor is None or not cursor.strip():
        return None
    refused = DlqUsageError("cursor: not one this list gave out; start from the first page")
    if len(cursor) > 200:
        raise refused
    try:
        text = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        when, _, row_id = text.decode("ascii").partition("|")
        at = datetime.fromisoformat(when)
        number = int(row_id) if row_id.isdigit() else 0
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refused from None
    if at.tzinfo is None or not 0 < number <= MAX_ROW_ID:
        raise refused
    return Position(at.astimezone(UTC), number)


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
