"""Braintree's notification as a document: the form's `bt_payload`, base64 of XML, read
into the nested mapping the mapping and the pointers read (`/subject/dispute/amount`).

Pure. The shape follows the `braintree` library's own reader (`util/parser.py`), so a
path here is the attribute path its `WebhookNotification` exposes: tag names with `_`
for `-` (`amount-disputed` is `amount_disputed`), `type="array"` a list, `nil="true"`
None, `type="boolean"` a bool; every other value stays the text Braintree wrote
(amounts are decimal strings, read exactly by `core.bodies.fields.get_decimal_amount`).

Braintree sends no event id (payment-providers.md, A3). The document carries one the
gateway derives, `event_id`: the kind, the subject's id and the notification's
timestamp (`dispute_won:dsp_1:2026-01-02T03:04:05Z`). Braintree's retries of one
notification repeat its payload, so they share it; a new notification about the same
subject has a new timestamp.
"""

from __future__ import annotations

import base64
import binascii
import re
import xml.etree.ElementTree as ElementTree
from typing import Any

from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.errors import PayloadInvalid

#: What `bt_payload` may hold: the SDK refuses anything else before its HMAC
#: (`WebhookNotificationGateway.parse`), so the gateway does too.
PAYLOAD_CHARS = re.compile(rb"[A-Za-z0-9+=/\n]*")
#: Deeper than any notification (a dispute's evidence list is four levels down).
DEPTH_MAX = 16
#: More elements than any notification carries (a disbursement lists its transactions).
ELEMENTS_MAX = 20_000
_DOCTYPE = re.compile(r"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)


def payload_of(body: bytes) -> bytes:
    """The form's `bt_payload` as sent (base64 text); `PayloadInvalid` otherwise."""
    try:
        fields = form_fields(body)
    except FormInvalid as exc:
        raise PayloadInvalid(str(exc)) from None
    payload = fields.get("bt_payload")
    if not payload:
        raise PayloadInvalid("the form has no bt_payload")
    raw = payload.encode("ascii", errors="replace")
    if not PAYLOAD_CHARS.fullmatch(raw):
        raise PayloadInvalid("bt_payload holds characters outside base64")
    return raw


def document(body: bytes) -> dict[str, Any]:
    """The notification (`kind`, `timestamp`, `subject`, ...) with its derived
    `event_id`; `PayloadInvalid` for a body that is not a Braintree notification."""
    try:
        xml = base64.b64decode(payload_of(body).replace(b"\n", b""), validate=True)
        text = xml.decode("utf-8")
    except binascii.Error:
        raise PayloadInvalid("bt_payload is not base64") from None
    except UnicodeDecodeError:
        raise PayloadInvalid("bt_payload's XML is not UTF-8") from None
    # The check below must read what expat reads. Given bytes, expat follows the XML's
    # own encoding (UTF-16, whose `<!DOCTYPE` the check cannot see); given text, it
    # reads UTF-8, except that it still takes text whose markup alternates with NULs
    # for UTF-16. XML allows no NUL, and Braintree's XML is UTF-8.
    if "\x00" in text:
        raise PayloadInvalid("bt_payload's XML holds a NUL")
    # Braintree's XML declares no document type; one that does could define entities.
    if _DOCTYPE.search(text):
        raise PayloadInvalid("bt_payload's XML declares a document type")
    try:
        # Safe here: a document type (and so any entity) was refused above, and the
        # standard library's parser resolves no external resource.
        root = ElementTree.fromstring(text)  # noqa: S314
    except ElementTree.ParseError as exc:
        raise PayloadInvalid(f"bt_payload is not XML: {exc}") from None
    if root.tag != "notification":
        raise PayloadInvalid(f"bt_payload's XML is a {root.tag[:40]!r}, not a notification")
    count = sum(1 for _ in root.iter())
    if count > ELEMENTS_MAX:
        raise PayloadInvalid(f"bt_payload's XML has {count} elements (at most {ELEMENTS_MAX})")
    found = _value(root, 0)
    notification: dict[str, Any] = found if isinstance(found, dict) else {}
    event_id = derived_id(notification)
    if event_id is not None:
        notification["event_id"] = event_id
    return notification


def derived_id(notification: dict[str, Any]) -> str | None:
    """`kind:subject id:timestamp`, or `kind:timestamp` for a subject without an id (the
    Control Panel's `check`); None without a kind or a timestamp (the event is then
    recorded under its body's digest and parked, as any event without an id)."""
    kind, timestamp, subject = (notification.get(k) for k in ("kind", "timestamp", "subject"))
    inner = next(iter(subject.values()), None) if isinstance(subject, dict) else None
    subject_id = inner.get("id") if isinstance(inner, dict) else None
    if not (isinstance(kind, str) and kind and isinstance(timestamp, str) and timestamp):
        return None
    if isinstance(subject_id, str) and subject_id:
        return f"{kind}:{subject_id}:{timestamp}"
    return f"{kind}:{timestamp}"


def _name(tag: str) -> str:
    return tag.replace("-", "_")


def _value(node: ElementTree.Element, depth: int) -> Any:
    """One element as the SDK's reader gives it (see the module's docstring)."""
    if depth > DEPTH_MAX:
        raise PayloadInvalid(f"bt_payload's XML is nested deeper than {DEPTH_MAX}")
    kind = node.get("type")
    if node.get("nil") == "true":
        return None
    if kind == "array":
        return [_value(child, depth + 1) for child in node]
    if len(node):
        found: dict[str, Any] = {}
        repeated: set[str] = set()
        for child in node:
            name, value = _name(child.tag), _value(child, depth + 1)
            if name in repeated:
                found[name].append(value)
            elif name in found:  # a repeated element, as the SDK reads it: a list
                found[name] = [found[name], value]
                repeated.add(name)
            else:
                found[name] = value
        return found
    text = (node.text or "").strip()
    if kind == "boolean":
        return text == "true"
    return text
