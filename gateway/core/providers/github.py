"""GitHub: `X-Hub-Signature-256: sha256=<hex>`, an HMAC-SHA256 of the body alone; the
delivery id and the event in headers the signature does not cover. Its events move no
money; backfill lists a hook's deliveries."""

from __future__ import annotations

from gateway.core.providers.base import Provider
from gateway.core.signatures.base import Encoding
from gateway.core.signatures.body_hmac import BodyHmacScheme

GITHUB = Provider(
    name="github",
    title="GitHub",
    scheme=BodyHmacScheme(
        "github",
        "X-Hub-Signature-256",
        Encoding.HEX,
        "sha256=",
        "X-GitHub-Delivery",
        "X-GitHub-Event",
        (
            "X-GitHub-Hook-ID",
            "X-GitHub-Hook-Installation-Target-ID",
            "X-GitHub-Hook-Installation-Target-Type",
        ),
    ),
    # No common notion of "the object" across its events: configured per provider.
    order_keys=(),
    backfill="a hook's deliveries (`GET /repos/{repo}/hooks/{id}/deliveries`)",
    cross_check='the example of GitHub\'s "Validating webhook deliveries" page',
    resign=True,
)
