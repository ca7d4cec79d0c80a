"""Signature schemes, one per provider family, looked up by name: each verifies what a
provider sends (`scheme.verify`) and signs as that provider would (`scheme.sign`, used by
`gateway sign` and the tests), side by side so the two cannot drift apart. `SCHEMES` is
the one list of schemes: the settings and the CLI take their scheme names from it.

Every `verify` checks in the same order, so the error a bad request gets is predictable:
1. required headers are present (else `SignatureMissing`); `scheme.required_headers`
   names them, so the gateway can refuse a request without them before reading its body;
2. every header is parsed and every offered signature decoded (else `SignatureMalformed`);
3. the signed timestamp is within ±tolerance_s of now, if the scheme signs one
   (else `TimestampOutOfWindow`);
4. some configured secret produces some offered signature (else `SignatureMismatch`).
The window is checked before any HMAC is computed so stale replays cost no hashing.

Every `sign` is pure too: the time is an argument, and so is every event id it sends
(`scheme.new_event_id(uuid_text)` shapes one from randomness the caller brings).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    Scheme,
    SchemeParams,
    require_headers,
)
from gateway.core.signatures.body_hmac import GITHUB, RAZORPAY, SHOPIFY
from gateway.core.signatures.hmac_generic import HMAC, check_hmac_params
from gateway.core.signatures.standard import STANDARD, standard_key
from gateway.core.signatures.timestamped import PADDLE, STRIPE

__all__ = [
    "SCHEMES",
    "Encoding",
    "FieldRef",
    "Headers",
    "Scheme",
    "SchemeParams",
    "check_hmac_params",
    "get_scheme",
    "require_headers",
    "standard_key",
]

#: Every scheme by its configuration name; read-only so no caller can swap one out.
#: The order is the one error messages and `gateway sign --help` list them in.
SCHEMES: Mapping[str, Scheme] = MappingProxyType(
    {s.name: s for s in (STRIPE, STANDARD, GITHUB, SHOPIFY, PADDLE, RAZORPAY, HMAC)}
)


def get_scheme(name: str) -> Scheme:
    """The scheme called name; raise KeyError if there is none."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise KeyError(f"unknown signature scheme {name!r}") from None
