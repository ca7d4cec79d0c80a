"""Values repeated in error messages, cut to a bounded length.

An error's message is copied into the dead-letter row (`error_message`), into its stack
(`error_detail`), into log lines and alert texts. A value in it comes from the event (a
merchant id, a settlement id): 300 KB of merchant id made a 300 KB message, and more
than that once in every copy. `excerpt` keeps enough to recognise the value and says
how long it was; `capped` bounds a whole message as the last line of defence.
"""

from __future__ import annotations

#: The most characters of one value a message repeats: an id of ordinary length whole,
#: a pathological one recognisable.
FIELD_MAX_CHARS = 200
#: The most characters of a message a dead letter keeps (several fields and the prose).
MESSAGE_MAX_CHARS = 2_000
#: The most characters of a stack a dead letter keeps: a deep one whole, a stack that
#: repeats a huge message not.
DETAIL_MAX_CHARS = 32_000
ELLIPSIS = "..."


def excerpt(value: str, max_chars: int = FIELD_MAX_CHARS) -> str:
    """`value` quoted (`repr`), or its first `max_chars` characters quoted, an ellipsis
    and its length: `'m_xxxx...' (300000 chars)`."""
    if len(value) <= max_chars:
        return repr(value)
    return f"{value[:max_chars]!r}{ELLIPSIS} ({len(value)} chars)"


def clip(value: str, max_chars: int = FIELD_MAX_CHARS) -> str:
    """`value` as it is, or its first `max_chars` characters, an ellipsis and its length
    (for messages that repeat a value unquoted)."""
    if len(value) <= max_chars:
        return value
    return f"{value[:max_chars]}{ELLIPSIS} ({len(value)} chars)"


def capped(message: str, max_chars: int = MESSAGE_MAX_CHARS) -> str:
    """A whole message (or, with `DETAIL_MAX_CHARS`, a stack) cut as `clip` cuts a value."""
    return clip(message, max_chars)
