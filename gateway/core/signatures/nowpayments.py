"""NOWPayments' IPN: `x-nowpayments-sig`, the hex HMAC-SHA512, keyed with the IPN secret,
of the JSON body parsed and written again with its keys sorted, as JavaScript writes
it. Pure.

The rule is NOWPayments' (API documentation, "Instant Payments Notifications"): "Sort the
POST request by keys and convert it to string using JSON.stringify", with the Node.js
example `JSON.stringify(sortObject(params))`, whose `sortObject` sorts nested objects
too; NOWPayments' Node.js SDK (NowPaymentsIO/nowpayments-sdk-nodejs `src/ipn.js`,
`createWebhookSignature`) signs `JSON.stringify(sortObjectDeep(payload))` with the secret
trimmed. What is signed is JavaScript's text of the parsed body, not the bytes received,
and `signed_forms` writes that text byte for byte:

- an object's keys sorted by UTF-16 code units (`Array.prototype.sort`), except that
  array-index keys ("0" to "4294967294") come first in numeric order, as every
  JavaScript object lists them; a `__proto__` key is dropped (assigning it to the sorted
  copy sets its prototype);
- no blanks; in strings only `"`, `\\` and control characters escaped (`\\n`,
  `\\u001f`), a lone surrogate as `\\udXXX`; `/`, U+2028 and all other non-ASCII as is;
- numbers as JavaScript writes the double their text parses to (`js_number`): `1.50` is
  `1.5`, `15.0` is `15`, `1E-7` and `0.0000001` are `1e-7`, `12345678901234567890` is
  `12345678901234567000`, `1e400` is `null`. NOWPayments writes its bodies with
  `JSON.stringify`, so its numbers are in that form already and are kept as written;
  any other spelling is signed in JavaScript's form, which is what the rule signs;
- arrays: the SDK keeps them, the documentation's `sortObject` turns one into an object
  keyed "0", "1", ... (`typeof [] === 'object'`). No documented IPN holds an array, so a
  body with one is checked against both forms. (An object with its own `constructor`
  key, which the SDK leaves unsorted, is sorted, as the documentation's function does.)

The documentation's PHP and Python examples part from the Node.js one on such edges
(both escape non-ASCII, Python writes `1e-07`), so the Node.js rule is the one held to.

Check order (`core.signatures`): the header is present (`SignatureMissing`); it holds 1 to
`SIGNATURES_MAX` signatures of 64 bytes in hex, and the body is a JSON object as
`JSON.parse` reads it (UTF-8, no `NaN`, nested at most `DEPTH_MAX` deep), else
`SignatureMalformed`; some secret's HMAC of some form equals some signature, every pair
compared in constant time (`SignatureMismatch`). Nothing time-bound is signed.

The event id (`payment_id:payment_status`) is inside the signed body, but two bodies can
share one signed text (`1.5` and `1.50`; an integer past 2**53 spelt two ways): the
SHA-256 of the signed text is recorded (`replay_digest`), so a respelt replay is a
duplicate whatever id it claims.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from gateway.core.signatures.base import (
    Algorithm,
    BodySigned,
    Encoding,
    FieldRef,
    Headers,
    HmacKey,
    ParamProblem,
    SchemeParams,
    Verifier,
    decode_signature,
    encode_signature,
    matches,
    require_header,
    sha256_of,
    signing_secret,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

#: The header as NOWPayments sends it, which is also how the gateway reads it.
HEADER = "x-nowpayments-sig"
#: NOWPayments sends one signature; a few more leave room for a proxy's repeats.
SIGNATURES_MAX = 8
HEADER_CHARS_MAX = SIGNATURES_MAX * (128 + 2)
#: IPNs nest two deep (`fee`); a deeper body is no IPN, and the recursion stays bounded.
DEPTH_MAX = 32
_SEPARATORS = re.compile(r"[,\s]+")
#: A payment's status change; else a payout's (`id`, its batch, `status`); else a
#: custodial recurring payment's (`id`, `status`): the documented IPN bodies.
ID_REF = FieldRef("json", "payment_id", also=("payment_status",), fallback=FieldRef(
    "json", "id", also=("batch_withdrawal_id", "status"),
    fallback=FieldRef("json", "id", also=("status",))))  # fmt: skip
TYPE_REF = FieldRef("json", "payment_status", fallback=FieldRef("json", "status"))
#: Keys JavaScript lists first, as numbers: the array indices, 0 to 2**32 - 2.
_INDEX = re.compile(r"0|[1-9][0-9]{0,9}", re.ASCII)
_INDEX_MAX = 2**32 - 2
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Number(str):
    """A JSON number's text as written (what `json.loads` hands `parse_int`/`parse_float`)."""

    __slots__ = ()


def refuse_constant(name: str) -> Any:
    """`json.loads`'s `parse_constant`: Python takes `NaN` and `Infinity`, JSON.parse not."""
    raise ValueError(f"{name} is not JSON")


def parse_body(body: bytes) -> dict[str, Any]:
    """The body as `JSON.parse` reads it, numbers kept as their text; `SignatureMalformed`
    unless it is a UTF-8 JSON object."""
    try:
        doc = json.loads(body.decode("utf-8"), parse_int=_Number, parse_float=_Number,
                         parse_constant=refuse_constant)  # fmt: skip
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError too
        raise SignatureMalformed("the IPN body is not JSON") from None
    if type(doc) is not dict:
        raise SignatureMalformed("the IPN body is not a JSON object")
    return doc


def signed_forms(doc: dict[str, Any]) -> tuple[bytes, ...]:
    """The texts a signature of `doc` may cover: the SDK's, then, for a body holding an
    array, the documentation's (arrays as objects)."""
    kept: list[str] = []
    has_array = _write(doc, False, 0, kept)
    first = "".join(kept).encode("utf-8")
    if not has_array:
        return (first,)
    objects: list[str] = []
    _write(doc, True, 0, objects)
    return (first, "".join(objects).encode("utf-8"))


def _write(value: Any, arrays_as_objects: bool, depth: int, out: list[str]) -> bool:
    """Append `JSON.stringify(sortObject(value))` to `out`; whether an array was met."""
    if depth > DEPTH_MAX:
        raise SignatureMalformed(f"the IPN body nests deeper than {DEPTH_MAX}")
    kind = type(value)
    if kind is _Number:
        out.append(js_number(value))
        return False
    if kind is str:
        out.append(js_string(value))
        return False
    if kind is dict or (kind is list and arrays_as_objects):
        items = value.items() if kind is dict else ((str(i), v) for i, v in enumerate(value))
        found = kind is list
        out.append("{")
        for n, (key, item) in enumerate(_js_order(dict(items))):
            out.append("," if n else "")
            out.append(js_string(key) + ":")
            found |= _write(item, arrays_as_objects, depth + 1, out)
        out.append("}")
        return found
    if kind is list:
        out.append("[")
        for n, item in enumerate(value):
            out.append("," if n else "")
            _write(item, arrays_as_objects, depth + 1, out)
        out.append("]")
        return True
    out.append("null" if value is None else "true" if value is True else "false")
    return False


def _js_order(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """`obj`'s items as JavaScript lists a sorted copy of it: array indices in numeric
    order, then the other keys by UTF-16 code units; `__proto__` dropped."""
    indices = sorted((k for k in obj if _is_index(k)), key=int)
    others = sorted((k for k in obj if k != "__proto__" and not _is_index(k)),
                    key=lambda k: k.encode("utf-16-be", "surrogatepass"))  # fmt: skip
    for key in (*indices, *others):
        yield key, obj[key]


def _is_index(key: str) -> bool:
    return _INDEX.fullmatch(key) is not None and int(key) <= _INDEX_MAX


def js_string(text: str) -> str:
    """`JSON.stringify(text)`: Python's escapes without `ensure_ascii` are the same ones
    (`\\u001f` in lower case too); only a lone surrogate, which JavaScript escapes, is
    left raw by Python."""
    written = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", written)


def js_number(text: str) -> str:
    """`JSON.stringify(JSON.parse(text))` for a JSON number (ECMAScript's
    Number::toString). Python's `repr` finds the same shortest digits that round-trip;
    only where the point and the exponent go differs."""
    value = float(text)  # correctly rounded, as JSON.parse; past the doubles, inf
    if value in (float("inf"), float("-inf")):
        return "null"
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    found = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, found.digits))
    k = len(digits)
    n = k + int(found.exponent)  # the value is 0.DIGITS times 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    exponent = f"e{'+' if n >= 1 else '-'}{abs(n - 1)}"
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + exponent


def _key(secret: str) -> HmacKey:
    """The IPN secret as the key, trimmed as NOWPayments' SDK and PHP example trim it."""
    trimmed = secret.strip()
    if not trimmed:
        raise ParamProblem("secrets", "an IPN secret is blank")
    return HmacKey(trimmed.encode("utf-8"), Algorithm.SHA512)


def offered_signatures(text: str) -> list[bytes]:
    """The signatures a header offers, decoded; `SignatureMalformed` unless it is 1 to
    `SIGNATURES_MAX` of 128 hex digits (either case), separated by commas or blanks."""
    if len(text) > HEADER_CHARS_MAX:
        raise SignatureMalformed(f"{HEADER} is over {HEADER_CHARS_MAX} characters")
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens or len(tokens) > SIGNATURES_MAX:
        raise SignatureMalformed(f"{HEADER} holds {len(tokens)} signatures")
    return [decode_signature(t, Encoding.HEX, Algorithm.SHA512.digest_size) for t in tokens]


class NowPaymentsScheme(BodySigned):
    """NOWPayments' IPN: a hex HMAC-SHA512 of the body's sorted JavaScript text."""

    name = "nowpayments"
    header = HEADER

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header and the body, then compare every form against every secret."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: its secrets' keys prepared once."""
        keys = tuple(_key(s) for s in params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            offered = offered_signatures(require_header(headers, HEADER))
            found = False
            for form in signed_forms(parse_body(body)):  # no early exit: constant time
                found |= matches(keys, offered, form)
            if not found:
                raise SignatureMismatch(f"no configured secret matches {HEADER}")

        return verify

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """`x-nowpayments-sig` over the SDK's form of body; the id and type are the
        body's. ValueError for a body that is not a JSON object."""
        try:
            form = signed_forms(parse_body(body))[0]
        except SignatureMalformed as exc:
            raise ValueError(f"NOWPayments signs a JSON object: {exc}") from None
        mac = _key(signing_secret(params)).digest(form)
        return {HEADER: encode_signature(mac, Encoding.HEX)}

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `payment_id:payment_status` (a payout's or a recurring payment's
        `id:…:status`)."""
        return ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `payment_status` (a payout's `status`)."""
        return TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """False: the signature covers the body's text as JavaScript writes it, which two
        spellings of one body share (see the module's docstring)."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the signed text (the SDK's form), whatever the body's spelling."""
        return sha256_of(signed_forms(parse_body(body))[0])


SCHEME = NowPaymentsScheme()
