"""Signature schemes, one class per family of providers: each verifies what a provider
sends (`scheme.verify`) and signs as that provider would (`scheme.sign`, used by
`gateway sign`, forwarding and the tests), side by side so the two cannot drift apart.
Each provider's module (`core.providers`) makes its scheme from one of these classes;
the registry there is the one list of scheme names.

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

from gateway.core.signatures.base import (
    Algorithm,
    Encoding,
    FieldRef,
    Headers,
    KeyEncoding,
    Scheme,
    SchemeParams,
    SignedContent,
    require_headers,
)
from gateway.core.signatures.hmac_generic import check_hmac_params
from gateway.core.signatures.standard import standard_key

__all__ = [
    "Algorithm",
    "Encoding",
    "FieldRef",
    "Headers",
    "KeyEncoding",
    "Scheme",
    "SchemeParams",
    "SignedContent",
    "check_hmac_params",
    "require_headers",
    "standard_key",
]
