"""Standard Webhooks senders (Svix and those built on it): `webhook-id`,
`webhook-timestamp` and `webhook-signature` over `{id}.{timestamp}.{body}`. Their events
move no money; keys are configured per provider."""

from __future__ import annotations

from gateway.core.providers.base import Provider
from gateway.core.signatures.standard import StandardScheme

STANDARD = Provider(
    name="standard",
    title="Standard Webhooks",
    scheme=StandardScheme(),
    cross_check="`standardwebhooks.Webhook.verify` and the specification's published vector",
    resign=True,
)
