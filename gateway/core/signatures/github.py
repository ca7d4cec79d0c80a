"""GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body; no timestamp."""

from __future__ import annotations

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    any_match,
    decode_signature,
    hmac_sha256,
    require_header,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

HEADER = "x-hub-signature-256"
PREFIX = "sha256="


class GitHubScheme:
    """GitHub's HMAC-SHA256 body signature."""

    name: str = "github"
    body_carries_id: bool = False

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, then compare against every secret (GitHub signs no timestamp)."""
        offered: list[bytes] = []
        # GitHub sends one value; a comma list is what a proxy makes of a repeated header.
        for item in require_header(headers, HEADER).split(","):
            item = item.strip()
            if not item.startswith(PREFIX):
                raise SignatureMalformed(f"{HEADER} value does not start with {PREFIX}")
            offered.append(decode_signature(item.removeprefix(PREFIX), Encoding.HEX))
        expected = [hmac_sha256(s.encode("utf-8"), body) for s in params.secrets]
        if not any_match(expected, offered):
            raise SignatureMismatch(f"no configured secret matches {HEADER}")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The delivery id is the `X-GitHub-Delivery` header."""
        return FieldRef("header", "x-github-delivery")

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type is the `X-GitHub-Event` header."""
        return FieldRef("header", "x-github-event")


GITHUB = GitHubScheme()
