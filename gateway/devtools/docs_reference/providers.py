"""The providers reference page, generated from the registry (`core.providers.PROVIDERS`):
each scheme's defaults as its module declares them."""

from __future__ import annotations

from gateway.core.money import minor_exponent
from gateway.core.ordering.keys import KeyRule
from gateway.core.providers import PROVIDERS, Provider
from gateway.core.signatures import SchemeParams
from gateway.devtools.docs_reference.text import code, generated_header, table

__all__ = ["render"]

#: Parameters the fixed schemes are asked their headers with (a URL for Square's).
_PARAMS = SchemeParams(secrets=(), url="https://gateway.example/webhooks/NAME")


def _settles(p: Provider) -> str:
    if p.movements is None:
        return "never"
    kinds = {k.value: None for kinds in p.movements.types.values() for k in kinds}
    return ", ".join(code(k) for k in kinds)


def _units(p: Provider) -> str:
    rows = [
        f"{code(c)} {u.exponent} (ISO {minor_exponent(c)})" + (
            f", multiples of {u.multiple_of}" if u.multiple_of != 1 else "")
        for c, u in sorted(p.units.items())
    ]  # fmt: skip
    return "; ".join(rows) or "as ISO 4217"


def _rules(rules: tuple[KeyRule, ...]) -> str:
    return ", ".join(code(r.text) for r in rules) or "none"


def _headers(p: Provider) -> str:
    if p.name == "hmac":
        return "configured"
    if p.confirmation is not None:  # Mollie's classic: unsigned, confirmed by a fetch
        return "none: confirmed by a fetch from its API"
    names = p.scheme.signature_headers(_PARAMS)
    return ", ".join(code(n) for n in names) or "in the body"


def render() -> str:
    """The page `docs/reference/providers.md`."""
    summary = table(
        ("Scheme", "Provider", "Signature", "Settles as", "Backfill", "Verifier held to"),
        (
            (code(p.name), p.title, _headers(p), _settles(p), p.backfill or "none",
             p.cross_check)
            for p in PROVIDERS.values()
        ),
    )  # fmt: skip
    defaults = table(
        ("Scheme", "Default `merchant`", "Default `order_key`", "Amounts unlike ISO 4217"),
        (
            (code(p.name), _rules(p.movements.merchant) if p.movements else "n/a",
             _rules(p.order_keys), _units(p) if p.movements else "n/a")
            for p in PROVIDERS.values()
        ),
    )  # fmt: skip
    batches = table(
        ("Scheme", "Signature covers", "Items a request", "Bytes an item", "Answered"),
        (
            (code(p.name), "the whole request" if p.batch.signed_whole else "each item",
             f"{p.batch.items_max:,}", f"{p.batch.item_bytes_max:,}",
             code(p.answer.body.decode()) if p.answer.body else "the gateway's JSON")
            for p in PROVIDERS.values() if p.batch is not None
        ),
    )  # fmt: skip
    own_status = ", ".join(
        f"{code(p.name)} with `{p.refused_status}`"
        for p in PROVIDERS.values() if p.refused_status != 401
    )  # fmt: skip
    return (
        generated_header("gateway.core.providers.PROVIDERS")
        + "# Providers\n\n"
        + "Every scheme a `[providers.NAME]` table may name, as its module in "
        + "`gateway/core/providers/` declares it. How to configure each is on "
        + "[Providers](../providers.md); which event types settle as which movement, on "
        + "[Money movements](movements.md).\n\n"
        + summary
        + "\nA request whose signature fails is answered `401`"
        + (f", except by the schemes that ask for their own: {own_status}" if own_status else "")
        + ".\n"
        + "\n## Defaults\n\n"
        + "Where each scheme's events name their merchant and their payment (the order "
        + "key) when the provider's table does not say, and the currencies whose "
        + "integer amounts it writes with another number of decimals than ISO 4217 "
        + "(read exactly, or parked as `PROVIDER_AMOUNT_INVALID`).\n\n"
        + defaults
        + "\n## Requests of several events\n\n"
        + "Each item is recorded on its own. Where the signature covers each item, each is "
        + "verified on its own and a bad one is stored nowhere while its neighbours are "
        + "recorded; where it covers the whole request, it is checked once and a bad one "
        + "refuses every item. A request over either bound is refused whole (`413`, "
        + "`batch_too_large`) before anything is recorded.\n\n"
        + batches
    )
