"""Who may send events: webhook providers (signature schemes and their secrets) and
internal services (bearer tokens and the subjects they may publish to), read from the
`[providers.*]` and `[services.*]` tables with errors that name the key."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from gateway.core.bodies.content import (
    COMMON_STORED,
    DEFAULT_HEADERS,
    NEVER_STORED,
    HeaderPolicy,
    header_policy,
)
from gateway.core.ordering.keys import KeyRule, literal_rule, parse_rules
from gateway.core.providers import SCHEME_NAMES as SCHEME_NAMES
from gateway.core.providers import get_provider, get_scheme
from gateway.core.providers.base import Confirmation
from gateway.core.signatures.base import (
    SchemeParams,
)
from gateway.core.type_patterns import type_patterns
from gateway.errors import ConfigError
from gateway.settings.ordering import OnPoison
from gateway.settings.provider_api import API_KEYS, ProviderApi, parse_provider_api
from gateway.settings.scheme_params import scheme_params
from gateway.settings.secrets import EVERY_SECRET, SecretScope
from gateway.settings.values import (
    env_name_shown,
    read_table,
    read_value,
    refuse_unknown,
)

#: Every key a `[providers.NAME]` table may hold (some only mean something for `hmac`).
PROVIDER_KEYS = (
    #: The signature scheme the provider signs with: one of {{SCHEME_NAMES}}.
    #: type: string
    #: default: none (required)
    "scheme",
    #: The webhook signing secrets, inline (development). Several = rotation: any of
    #: them verifies. A `standard` secret is `whsec_` + a base64 key.
    #: type: list of strings
    #: default: none (this or `secret_env` is required; `paypal` has no secret, and
    #: takes one only for `gateway sign`)
    "secrets",
    #: The environment variable holding the secret (production); during a rotation it
    #: may hold several, separated by spaces.
    #: type: string
    #: default: none (this or `secrets` is required)
    "secret_env",
    #: How far, in seconds, a signed timestamp may be from the gateway's clock.
    #: allowed: > 0
    "tolerance_s",
    #: `hmac` only: how the signature header encodes the digest.
    #: type: string
    #: allowed: `hex`, `base64`
    #: default: `hex`
    "encoding",
    #: `hmac` only: the hash the HMAC is built on.
    #: type: string
    #: allowed: `sha1`, `sha256`, `sha512`
    #: default: `sha256`
    "algorithm",
    #: `hmac` only: how a secret becomes the HMAC key: its text as shown (UTF-8), or
    #: decoded from hex or base64 (a provider that shows the key's bytes).
    #: type: string
    #: allowed: `text`, `hex`, `base64`
    #: default: `text`
    "key_encoding",
    #: `hmac` only: what the signature covers: the body, `{timestamp}.{body}` (needs
    #: `timestamp_header`), or `{url}{body}` (needs `notification_url`).
    #: type: string
    #: allowed: `body`, `timestamp.body`, `url+body`
    #: default: `timestamp.body` with a `timestamp_header`, else `body`
    "signed",
    #: The URL given to the provider, for a scheme that signs it (`square`, and `hmac`
    #: with `signed = "url+body"`): exactly as given there, since a proxy or a load
    #: balancer changes what the gateway itself sees.
    #: type: string
    #: default: none (required by `square`)
    "notification_url",
    #: `hmac` only: the header carrying the signature (required for `hmac`).
    "header",
    #: `hmac` only: text stripped from the signature before decoding (`sha256=`).
    "prefix",
    #: `hmac` only: a header with the signing time in unix seconds; with it the
    #: signature covers `{ts}.{body}` and the time must be within `tolerance_s`.
    "timestamp_header",
    #: `hmac` only (required there): where the event id is, `json:FIELD` at the body's
    #: top (`json:id`), `json:/POINTER` anywhere in it (`json:/data/id`), or
    #: `header:NAME`.
    #: type: string
    #: default: none
    "event_id_from",
    #: `hmac` only (required there): where the event type is, `json:FIELD`,
    #: `json:/POINTER` or `header:NAME`.
    #: type: string
    #: default: none
    "event_type_from",
    #: More request headers to keep with each event, besides the common ones and the
    #: scheme's own. A header that carries a signature or credentials is refused.
    #: type: list of strings
    #: default: `[]`
    "store_headers",
    #: An allow-list of event types: each pattern an exact type (`charge.refunded`) or
    #: a prefix ending in `*` (`payment_intent.*`). A correctly signed event of another
    #: type is still accepted, then parked in the dead-letter table as
    #: `EVENT_TYPE_NOT_ALLOWED` and not published.
    #: type: list of strings
    #: default: none (every type allowed)
    "event_types",
    #: Where each event's ordering key is, first match wins: `"/pointer"` (an RFC 6901
    #: JSON pointer into the body, for every type) or `"GLOB /pointer"` (only types the
    #: glob takes, as in `event_types`: `"refunds/* /order_id"`). The pointer must reach
    #: a non-empty string or an integer. Events with a key whose subject settlement
    #: consumes are numbered per key and settled in that order; `[]`: none is ordered.
    #: Without it, the scheme's own (each section of docs/providers.md): `stripe` the
    #: payment intent, else the object's id; a payment provider its payment; `shopify`
    #: the order of refunds, order transactions and orders; `github`, `standard` and
    #: `hmac` none.
    #: type: list of strings
    #: default: the scheme's own
    "order_key",
    #: What an event parked for good does to the later events of its key, for this
    #: provider: `hold` them behind it, or `skip` past it.
    #: allowed: `hold`, `skip`
    #: default: `[ordering] on_poison`
    "on_poison",
    #: Where each event names its merchant (whose ledger account it moves), first match
    #: wins, in the form of `order_key` (`"/pointer"` or `"GLOB /pointer"`). Without it,
    #: the scheme's own (docs/providers.md): `stripe` `/data/object/metadata/merchant_id`
    #: (a Connect payout: its `account`), `paddle` `/data/custom_data/merchant_id`,
    #: `adyen` the item's `merchantAccountCode`, and so on. A capture or payout
    #: without a merchant is parked (`MISSING_FIELD`); a refund or dispute takes its
    #: payment's.
    #: type: list of strings
    #: default: the scheme's own
    "merchant",
    #: The merchant of every event of this provider, for a provider account that is one
    #: merchant's (a PayTR store, an iyzico account: their callbacks name no merchant,
    #: or one nobody signs). With `merchant` also set, its pointers are read first and
    #: this is the merchant of the events they find none in; the scheme's own pointers
    #: are not read. 1 to 255 printable characters.
    #: type: string
    #: default: none
    "merchant_id",
    #: What settlement does with this provider's events that move no money (a type its
    #: mapping does not settle): `count` them in `gateway_settlement_unmapped_total` and
    #: acknowledge them, or `park` them in the dead-letter table (`EVENT_NOT_MAPPED`),
    #: to be replayed once they should settle. Only a payment provider's scheme has a
    #: mapping (docs/reference/movements.md); the other schemes' events never settle and
    #: are neither.
    #: allowed: `count`, `park`
    #: default: `count`
    "unmapped",
    #: `paypal` only (required there): the webhook id PayPal's dashboard shows for this
    #: webhook; PayPal signs it and never sends it.
    #: type: string
    #: default: none
    "webhook_id",
    #: `paypal` only: the certificate URL `gateway sign` points to in the requests it
    #: signs with `secrets[0]`, a PEM RSA private key (for a stand-in of PayPal in tests;
    #: verifying needs neither).
    #: type: string
    #: default: none
    "signing_cert_url",
    #: `paypal` only, for tests: `host:port` entries a signing certificate may be fetched
    #: from besides PayPal's own hosts (a local stand-in). Never needed for PayPal itself.
    #: type: list of strings
    #: default: `[]`
    "cert_extra_hosts",
    #: `paypal` only, for tests: a PEM file of CA certificates trusted besides the
    #: system's, for a stand-in's certificate chain and its TLS.
    #: type: string
    #: default: none
    "cert_extra_ca_file",
    #: `zarinpal` only (required there): where the payer's browser is sent once its
    #: callback is recorded (`GET /callbacks/NAME`), with `order` and `status` added
    #: to its query; an absolute `https://` (or, for development, `http://`) URL.
    #: type: string
    #: default: none
    "return_url",
    #: `iyzico` only: iyzico's id of the account (its `merchantId`, digits): signed in
    #: subscription notifications that may not carry it, and, when set, a notification
    #: naming another account is refused.
    #: type: string
    #: default: none
    "iyzico_merchant_id",
    #: `zarinpal` only: seconds after a callback within which its payment must be
    #: verified; a verify still failing after them is parked as
    #: `VERIFY_DEADLINE_PASSED` (the provider returns an unverified payment to the
    #: payer). 1 to 86400.
    #: type: number
    #: default: 900
    "verify_deadline_s",
    *API_KEYS,
)
#: Every key a `[services.NAME]` table may hold.
SERVICE_KEYS = (
    #: The service's bearer token, inline (development); every service needs its own.
    #: type: string
    #: default: none (this or `token_env` is required)
    "token",
    #: The environment variable holding the token (production).
    #: default: none (this or `token` is required)
    "token_env",
    #: The subjects the service may publish to: patterns inside `events.{service}.`
    #: (`*` for one token, a final `>` for the rest), so no two services share one.
    #: type: list of strings
    #: default: none (required)
    "subjects",
)

#: A provider's or service's name is a NATS subject token and the start of `Nats-Msg-Id`
#: (`{provider}:{event_id}`), so it holds no `.` (service `a.b` would publish where
#: service `a` does), no `:` (two senders could make one message id), and nothing
#: `subject_tokens` rewrites (`é` and `è` would share a subject): ASCII letters, digits,
#: `-` and `_`, with at least one letter or digit.
_NAME = re.compile(r"[A-Za-z0-9_-]*[A-Za-z0-9][A-Za-z0-9_-]*")
#: Internal events are recorded under `service:{name}`: a provider called `service`
#: sending event id `billing:k` would make the message id of service billing's event `k`.
_RESERVED_PROVIDER_NAMES = frozenset({"service"})
#: The longest `return_url`: the payer's browser is sent there with a few fields added.
RETURN_URL_CHARS_MAX = 2_000
#: One token of a subject the gateway publishes to (`core.events.model.subject_tokens`).
_SUBJECT_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
#: An HTTP header name (RFC 9110 token characters).
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


@dataclass(frozen=True)
class ProviderSettings:
    """One webhook sender: its name, signature scheme and verification parameters."""

    name: str
    scheme: str
    params: SchemeParams
    #: The headers stored with its events (scheme's own, referenced, `store_headers`).
    headers: HeaderPolicy = DEFAULT_HEADERS
    #: The `event_types` allow-list; None allows every type.
    event_types: tuple[str, ...] | None = None
    #: Its API, for `gateway backfill` (None: not configured); the key is never printed.
    api: ProviderApi | None = None
    #: Where its events' ordering keys are (`core.ordering.keys`); empty: none is ordered.
    order_key: tuple[KeyRule, ...] = ()
    #: Its own `on_poison` (`OnPoison`); None: `[ordering] on_poison` applies.
    on_poison: str | None = None
    #: Where its events name their merchant (`core.providers.movements`); None: the scheme's own.
    merchant: tuple[KeyRule, ...] | None = None
    #: `count` or `park` its events that move no money (`settlement.unmapped`).
    unmapped: str = "count"
    #: Where a payer's browser goes after its callback (`Provider.callback`); else None.
    return_url: str | None = None
    #: `verify_deadline_s` as configured; None: the provider's own (`Confirmation`).
    verify_deadline_s: float | None = None

    @property
    def confirmation(self) -> Confirmation | None:
        """How its webhooks are confirmed by a fetch (`gateway confirm`); None when they
        are taken as they come: a scheme without one, or one whose confirmation is
        `optional` and no API key is configured."""
        found = get_provider(self.scheme).confirmation
        if found is None or (found.optional and self.api is None):
            return None
        if self.verify_deadline_s is not None:
            return replace(found, deadline_s=self.verify_deadline_s)
        return found


@dataclass(frozen=True)
class ServiceSettings:
    """One internal publisher: its bearer token and the subjects it may publish to."""

    name: str
    token: str = field(repr=False)  # never printed
    subjects: tuple[str, ...]


def check_name(table: str, name: str) -> None:
    """Raise `ConfigError` unless `name` is a valid `[{table}.NAME]` (see `_NAME`)."""
    if not _NAME.fullmatch(name):
        # Quoted as TOML writes such a key, so the line stays one line whatever it holds.
        raise ConfigError(
            f"{table}.{json.dumps(name)}", "name must be ASCII letters, digits, '-' or '_'"
        )


def parse_provider(
    name: str, data: Mapping[str, Any], env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> ProviderSettings:
    check_name("providers", name)
    if name in _RESERVED_PROVIDER_NAMES:
        raise ConfigError(f"providers.{name}", "name is reserved for internal events")
    path = f"providers.{name}."
    refuse_unknown(data, path, PROVIDER_KEYS)
    scheme = read_value(data, "scheme", path, str, None)
    if scheme is None:
        raise ConfigError(f"{path}scheme", f"is required (one of {', '.join(SCHEME_NAMES)})")
    if scheme not in SCHEME_NAMES:
        raise ConfigError(
            f"{path}scheme", f"unknown scheme {scheme!r} (one of {', '.join(SCHEME_NAMES)})"
        )
    params = scheme_params(scheme, data, path, env, scope)
    api = parse_provider_api(scheme, data, path, env, scope)
    confirmation = get_provider(scheme).confirmation
    if api is None and confirmation is not None and not confirmation.optional:
        raise ConfigError(
            f"{path}api_key_env",
            f"is required: a {scheme} provider's webhooks only name a payment, which the "
            "gateway fetches from the provider's API with this key (`gateway confirm`)",
        )
    return ProviderSettings(
        name=name,
        scheme=scheme,
        params=params,
        headers=_header_policy(scheme, params, data, path),
        event_types=_event_types(data, path),
        api=api,
        order_key=_order_key(scheme, data, path),
        on_poison=_on_poison(data, path),
        merchant=_merchant(scheme, data, path),
        unmapped=_unmapped(data, path),
        return_url=_return_url(scheme, data, path),
        verify_deadline_s=_verify_deadline_s(scheme, data, path),
    )


def _verify_deadline_s(scheme: str, data: Mapping[str, Any], path: str) -> float | None:
    """`verify_deadline_s`, for a scheme whose confirmation has a deadline."""
    value: float | None = read_value(data, "verify_deadline_s", path, float, None)
    if value is None:
        return None
    confirmation = get_provider(scheme).confirmation
    if confirmation is None or confirmation.deadline_s is None:
        raise ConfigError(f"{path}verify_deadline_s", f"is not a setting of scheme {scheme!r}")
    if not 1 <= value <= 86_400:  # NaN and infinities fail here too
        raise ConfigError(f"{path}verify_deadline_s", "must be 1 to 86400 seconds")
    return float(value)


def _return_url(scheme: str, data: Mapping[str, Any], path: str) -> str | None:
    """`return_url`: required by a provider whose callbacks a browser brings, refused
    by the others; an absolute http(s) URL with no fragment (the gateway adds to its
    query)."""
    url: str | None = read_value(data, "return_url", path, str, None)
    if not get_provider(scheme).callback:
        if url is not None:
            raise ConfigError(f"{path}return_url", f"is not a setting of scheme {scheme!r}")
        return None
    if url is None:
        raise ConfigError(f"{path}return_url", "is required: where the payer's browser goes")
    # It becomes a `Location` header: printable ASCII only (no line break can split the
    # answer), and short enough for every browser.
    printable = url.isascii() and url.isprintable() and " " not in url
    if not printable or len(url) > RETURN_URL_CHARS_MAX:
        raise ConfigError(
            f"{path}return_url", f"must be printable ASCII, at most {RETURN_URL_CHARS_MAX} long"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
        raise ConfigError(f"{path}return_url", "must be an absolute http(s) URL, no fragment")
    return url


def _header_policy(
    scheme_name: str, params: SchemeParams, data: Mapping[str, Any], path: str
) -> HeaderPolicy:
    """The common headers, the scheme's own and referenced ones, then `store_headers`;
    a credential or signature header named there is refused, not silently dropped."""
    scheme = get_scheme(scheme_name)
    signature_headers = scheme.signature_headers(params)
    extra = data.get("store_headers", [])
    if not isinstance(extra, list) or not all(isinstance(h, str) for h in extra):
        raise ConfigError(f"{path}store_headers", "must be a list of header names")
    for header in extra:
        if not _HEADER_NAME.fullmatch(header):
            raise ConfigError(f"{path}store_headers", f"{header!r} is not a header name")
        if header.lower() in NEVER_STORED or header.lower() in signature_headers:
            raise ConfigError(
                f"{path}store_headers",
                f"{header!r} carries credentials or a signature and is never stored",
            )
    return header_policy(
        scheme.stored_headers(params), COMMON_STORED, extra, never=signature_headers
    )


def _event_types(data: Mapping[str, Any], path: str) -> tuple[str, ...] | None:
    if "event_types" not in data:
        return None
    patterns = data["event_types"]
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ConfigError(f"{path}event_types", "must be a list of event type patterns")
    try:
        return type_patterns(patterns)
    except ValueError as exc:
        raise ConfigError(f"{path}event_types", str(exc)) from None


def _order_key(scheme: str, data: Mapping[str, Any], path: str) -> tuple[KeyRule, ...]:
    """The provider's key rules: absent, its scheme's default; `[]`, none."""
    if "order_key" not in data:
        return get_provider(scheme).order_keys
    entries = data["order_key"]
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(f"{path}order_key", 'must be a list of "/pointer" or "GLOB /pointer"')
    try:
        return parse_rules(entries)
    except ValueError as exc:
        raise ConfigError(f"{path}order_key", str(exc)) from None


def _merchant(scheme: str, data: Mapping[str, Any], path: str) -> tuple[KeyRule, ...] | None:
    """Where the provider's events name their merchant (`merchant`), then the merchant
    of those that name none there (`merchant_id`: of every event without `merchant`);
    both absent: None (the scheme's own)."""
    rules: tuple[KeyRule, ...] | None = None
    if "merchant" in data:
        entries = data["merchant"]
        if (
            not isinstance(entries, list)
            or not entries
            or not all(isinstance(e, str) for e in entries)
        ):
            raise ConfigError(
                f"{path}merchant", 'must be a non-empty list of "/pointer" or "GLOB /pointer"'
            )
        try:
            rules = parse_rules(entries)
        except ValueError as exc:
            raise ConfigError(f"{path}merchant", str(exc)) from None
    fixed: str | None = read_value(data, "merchant_id", path, str, None)
    if fixed is None:
        return rules
    if not 0 < len(fixed) <= 255 or not fixed.isprintable() or fixed != fixed.strip():
        raise ConfigError(f"{path}merchant_id", "must be 1 to 255 printable characters")
    # Without `merchant`, the account's merchant is every event's: the scheme's own
    # pointers may read a field the provider does not sign (iyzico's `merchantId`).
    return (*(rules or ()), literal_rule(fixed))


def _unmapped(data: Mapping[str, Any], path: str) -> str:
    value = read_value(data, "unmapped", path, str, "count")
    if value not in ("count", "park"):
        raise ConfigError(f"{path}unmapped", f"must be 'count' or 'park', got {value!r}")
    return str(value)


def _on_poison(data: Mapping[str, Any], path: str) -> str | None:
    value = read_value(data, "on_poison", path, str, None)
    if value is not None and value not in set(OnPoison):
        raise ConfigError(f"{path}on_poison", f"must be 'hold' or 'skip', got {value!r}")
    return value  # type: ignore[no-any-return]


def parse_service(
    name: str, data: Mapping[str, Any], env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> ServiceSettings:
    check_name("services", name)
    path = f"services.{name}."
    refuse_unknown(data, path, SERVICE_KEYS)
    token = read_value(data, "token", path, str, None, secret=True)
    if token is None and "token_env" in data:
        var = read_value(data, "token_env", path, str, "", secret=True)
        if not var:
            raise ConfigError(f"{path}token_env", "must name an environment variable")
        if not scope.reads(f"{path}token_env"):
            # Not read by this command: an empty token, which authenticates no request.
            return ServiceSettings(name=name, token="", subjects=_scope(name, data, path))
        token = env.get(var)
        if not token:
            raise ConfigError(f"{path}token_env", f"{env_name_shown(var)} is not set")
    if not token:
        raise ConfigError(f"{path}token", "is required (or token_env)")
    return ServiceSettings(name=name, token=token, subjects=_scope(name, data, path))


def _scope(name: str, data: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The service's subject patterns, each inside `events.{name}.` and able to match.

    Confined to its own name, no service can publish where another does (with names
    free of `.`, two scopes cannot overlap).
    """
    subjects = data.get("subjects")
    if (
        not isinstance(subjects, list)
        or not subjects
        or not all(isinstance(s, str) for s in subjects)
    ):
        raise ConfigError(f"{path}subjects", "must be a non-empty list of subject patterns")
    for pattern in subjects:
        tokens = pattern.split(".")
        if tokens[:2] != ["events", name] or len(tokens) < 3:
            raise ConfigError(
                f"{path}subjects", f"{pattern!r} is outside events.{name}. (the service's own)"
            )
        last = len(tokens) - 1
        for i, part in enumerate(tokens[2:], start=2):
            wildcard = part == "*" or (part == ">" and i == last)
            if not wildcard and not _SUBJECT_TOKEN.fullmatch(part):
                raise ConfigError(
                    f"{path}subjects",
                    f"{pattern!r} can never match: tokens are letters, digits, '-', '_', "
                    "'*', or a final '>'",
                )
    return tuple(subjects)


def _tables(data: Mapping[str, Any], table: str) -> Mapping[str, Mapping[str, Any]]:
    """`[{table}.NAME]` tables by name; each must be a table."""
    tables = read_table(data, table, "")
    for name, value in tables.items():
        if not isinstance(value, Mapping):
            check_name(table, name)
            raise ConfigError(f"{table}.{name}", "must be a table")
    return tables


def parse_providers(
    data: Mapping[str, Any], env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> dict[str, ProviderSettings]:
    """Every `[providers.NAME]` table."""
    return {n: parse_provider(n, t, env, scope) for n, t in _tables(data, "providers").items()}


def parse_services(
    data: Mapping[str, Any], env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> dict[str, ServiceSettings]:
    """Every `[services.NAME]` table; no two may share a token.

    A shared token would make one of them unreachable: the request is authenticated as
    whichever service comes last, and publishes under its name.
    """
    services: dict[str, ServiceSettings] = {}
    owners: dict[str, str] = {}  # token -> the service it belongs to
    for name, table in _tables(data, "services").items():
        service = parse_service(name, table, env, scope)
        if service.token and service.token in owners:
            key = "token" if "token" in table else "token_env"
            raise ConfigError(
                f"services.{name}.{key}", f"same token as services.{owners[service.token]}"
            )
        owners[service.token] = name
        services[name] = service
    return services
