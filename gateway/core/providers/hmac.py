"""The generic `hmac` scheme, for a team's own senders or a provider without a scheme
of its own: everything about the signature is configured (`SchemeParams`). Its events
move no money; keys are configured per provider."""

from __future__ import annotations

from gateway.core.providers.base import Provider
from gateway.core.signatures.hmac_generic import HmacScheme

HMAC = Provider(
    name="hmac",
    title="Generic HMAC",
    scheme=HmacScheme(),
    cross_check="vectors written from RFC 2104 with the standard library's HMAC",
)
