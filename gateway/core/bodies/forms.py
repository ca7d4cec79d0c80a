"""Form bodies (`application/x-www-form-urlencoded`) read exactly and within bounds:
the providers that post forms (Braintree's `bt_signature` and `bt_payload`) send a few
fields, each once.

Pure.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

#: More fields than any provider's form carries; a body with more is not one of theirs.
FIELDS_MAX = 32


class FormInvalid(ValueError):
    """The body is not a form of distinct, UTF-8 fields within `FIELDS_MAX`."""


def form_fields(body: bytes) -> dict[str, str]:
    """The form's fields by name; `FormInvalid` for a body that is not UTF-8 form data,
    has more than `FIELDS_MAX` fields, or names a field twice (which one would count is
    a guess, and a signed field given twice is how a forgery hides a second value)."""
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=bool(text),
            encoding="utf-8",
            errors="strict",
            max_num_fields=FIELDS_MAX,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormInvalid(f"the body is not form data: {type(exc).__name__}") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise FormInvalid(f"the form names field {name[:40]!r} twice")
        fields[name] = value
    return fields
