"""The providers the gateway knows, one module each (a package for a provider with
several: Stripe, Mollie, GoCardless, Braintree), and the one registry naming them.

A provider's module declares its `Provider` (`base`): its signature scheme, where its
ids, types and order keys are, its batches and answer, its amounts' minor units and its
money movements. `[providers.NAME] scheme` names one of `PROVIDERS`; the settings, the
CLI, the ingest path, the settlement worker, the console and the docs take the list
from here. `movements` decides, from this registry, which events move money.

docs/development.md shows what adding a provider takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gateway.core.providers.adyen import ADYEN
from gateway.core.providers.base import Answer, Batch, CertificateSource, Movements, Provider
from gateway.core.providers.braintree.webhooks import BRAINTREE
from gateway.core.providers.checkout import CHECKOUT
from gateway.core.providers.github import GITHUB
from gateway.core.providers.gocardless.webhooks import GOCARDLESS
from gateway.core.providers.hmac import HMAC
from gateway.core.providers.iyzico.webhooks import IYZICO
from gateway.core.providers.mollie.classic import MOLLIE
from gateway.core.providers.mollie.events import MOLLIE_EVENTS
from gateway.core.providers.nowpayments import NOWPAYMENTS
from gateway.core.providers.paddle import PADDLE
from gateway.core.providers.paypal import PAYPAL
from gateway.core.providers.paystack import PAYSTACK
from gateway.core.providers.paytr import PAYTR
from gateway.core.providers.razorpay import RAZORPAY
from gateway.core.providers.shopify import SHOPIFY
from gateway.core.providers.square import SQUARE
from gateway.core.providers.standard import STANDARD
from gateway.core.providers.stripe.snapshot import STRIPE
from gateway.core.providers.stripe.thin import STRIPE_THIN
from gateway.core.providers.zarinpal import ZARINPAL
from gateway.core.signatures.base import Scheme

__all__ = [
    "PROVIDERS",
    "SCHEME_NAMES",
    "Answer",
    "Batch",
    "CertificateSource",
    "Movements",
    "Provider",
    "get_provider",
    "get_scheme",
]

#: Every provider by its scheme name; read-only so no caller can swap one out. The
#: order is the one error messages, `gateway sign --help` and the docs list them in.
PROVIDERS: Mapping[str, Provider] = MappingProxyType(
    {
        p.name: p
        for p in (
            STRIPE,
            STRIPE_THIN,
            STANDARD,
            GITHUB,
            SHOPIFY,
            PADDLE,
            RAZORPAY,
            ADYEN,
            CHECKOUT,
            SQUARE,
            PAYSTACK,
            BRAINTREE,
            GOCARDLESS,
            PAYPAL,
            IYZICO,
            MOLLIE,
            MOLLIE_EVENTS,
            PAYTR,
            NOWPAYMENTS,
            ZARINPAL,
            HMAC,
        )
    }
)
#: The scheme names a provider may use, in the registry's order.
SCHEME_NAMES: tuple[str, ...] = tuple(PROVIDERS)


def get_provider(name: str) -> Provider:
    """The provider whose scheme is called name; KeyError if there is none."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise KeyError(f"unknown signature scheme {name!r}") from None


def get_scheme(name: str) -> Scheme:
    """The signature scheme called name; KeyError if there is none."""
    return get_provider(name).scheme
