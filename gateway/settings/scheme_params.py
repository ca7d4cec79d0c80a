"""How a provider's requests are verified, read from its `[providers.NAME]` table:
its secrets (inline or from the environment), the tolerance of a signed timestamp, the
generic `hmac` scheme's choices, and the URL a scheme that signs it needs. Every
scheme checks the result at start-up (`Scheme.verifier`), so a secret it cannot use
stops the gateway naming the key, never a request."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gateway.core.providers import get_scheme
from gateway.core.signatures import standard_key
from gateway.core.signatures.base import (
    Algorithm,
    Encoding,
    FieldRef,
    KeyEncoding,
    ParamProblem,
    SchemeParams,
    SignedContent,
)
from gateway.core.signatures.iyzico import MERCHANT_ID as IYZICO_MERCHANT_ID
from gateway.errors import ConfigError
from gateway.settings.certificate_params import paypal_extra
from gateway.settings.secrets import EVERY_SECRET, SecretScope
from gateway.settings.values import env_name_shown, read_value, require_positive

_E = TypeVar("_E", bound=enum.StrEnum)


#: The schemes whose webhooks need no secret of the provider's.
_UNSECRETED = frozenset({"paypal", "mollie"})


def scheme_params(
    scheme: str,
    data: Mapping[str, Any],
    path: str,
    env: Mapping[str, str],
    scope: SecretScope = EVERY_SECRET,
) -> SchemeParams:
    """The provider's verification parameters; ConfigError naming the key otherwise.
    A `secret_env` outside `scope` is not read (`gateway.settings.secrets`)."""
    # PayPal signs with its certificate: a secret there is only what `gateway sign` uses.
    # Mollie's classic webhooks are not signed: each is confirmed by a fetch instead.
    secrets = _secret_list(data, path, env, scope, required=scheme not in _UNSECRETED)
    tolerance_s = read_value(data, "tolerance_s", path, int, 300)
    require_positive(tolerance_s, f"{path}tolerance_s")
    signed_text = read_value(data, "signed", path, str, None)
    params = SchemeParams(
        secrets=secrets,
        tolerance_s=tolerance_s,
        header=read_value(data, "header", path, str, "").lower(),
        encoding=_choice(data, "encoding", path, Encoding, "hex"),
        algorithm=_choice(data, "algorithm", path, Algorithm, "sha256"),
        key_encoding=_choice(data, "key_encoding", path, KeyEncoding, "text"),
        signed=None if signed_text is None else _choice(data, "signed", path, SignedContent, ""),
        url=_notification_url(data, path),
        prefix=read_value(data, "prefix", path, str, ""),
        timestamp_header=read_value(data, "timestamp_header", path, str, "").lower(),
        event_id_from=_field_ref(data, "event_id_from", path),
        event_type_from=_field_ref(data, "event_type_from", path),
        extra={**paypal_extra(scheme, data, path), **_iyzico_extra(scheme, data, path)},
    )
    if scheme == "hmac":
        for key, value in (
            ("header", params.header),
            ("event_id_from", params.event_id_from),
            ("event_type_from", params.event_type_from),
        ):
            if not value:
                raise ConfigError(f"{path}{key}", "is required for scheme 'hmac'")
    if scheme == "standard":
        for secret in secrets:
            try:
                standard_key(secret)
            except ValueError:
                raise ConfigError(f"{path}secrets", "must be 'whsec_' + base64 key") from None
    try:
        # Every scheme's own checks, once, at start-up (`check_hmac_params` for `hmac`).
        get_scheme(scheme).verifier(params)
    except ValueError as exc:
        raise ConfigError(f"{path}{_key_of(exc)}", str(exc)) from None
    return params


def _secret_list(
    data: Mapping[str, Any],
    path: str,
    env: Mapping[str, str],
    scope: SecretScope,
    *,
    required: bool = True,
) -> tuple[str, ...]:
    secrets: list[str] = []
    unread = False  # named by secret_env, which this command does not read
    if "secrets" in data:
        raw = data["secrets"]
        if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
            raise ConfigError(f"{path}secrets", "must be a list of non-empty strings")
        secrets.extend(raw)
    if "secret_env" in data:
        name = data["secret_env"]
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}secret_env", "must name an environment variable")
        unread = not scope.reads(f"{path}secret_env")
        value = "" if unread else env.get(name)
        if not value and not unread:
            raise ConfigError(f"{path}secret_env", f"{env_name_shown(name)} is not set")
        # One variable may carry several secrets during a rotation, separated by spaces.
        secrets.extend((value or "").split())
    if not secrets and not unread and required:
        raise ConfigError(f"{path}secrets", "is required (or secret_env)")
    return tuple(secrets)


def _field_ref(data: Mapping[str, Any], key: str, path: str) -> FieldRef | None:
    text = read_value(data, key, path, str, None)
    if text is None:
        return None
    try:
        return FieldRef.parse(text)
    except ValueError as exc:
        raise ConfigError(f"{path}{key}", str(exc)) from None


def _choice(data: Mapping[str, Any], key: str, path: str, choices: type[_E], default: str) -> _E:
    """The value of `key`, one of the enum's; ConfigError listing them otherwise."""
    text = read_value(data, key, path, str, default)
    try:
        return choices(text)
    except ValueError:
        allowed = ", ".join(repr(c.value) for c in choices)
        raise ConfigError(f"{path}{key}", f"must be one of {allowed}") from None


def _notification_url(data: Mapping[str, Any], path: str) -> str:
    """`notification_url` as given to the provider: http(s), with a host, no blanks."""
    url: str = read_value(data, "notification_url", path, str, "")
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or url != url.strip():
        raise ConfigError(f"{path}notification_url", "must be an http(s) URL with a host")
    return url


def _key_of(exc: ValueError) -> str:
    """The settings key a scheme's ValueError is about: the one a `ParamProblem` names,
    else the secrets (what a scheme's own key checks are about)."""
    return exc.key if isinstance(exc, ParamProblem) else "secrets"


def _iyzico_extra(scheme: str, data: Mapping[str, Any], path: str) -> dict[str, str]:
    """`iyzico_merchant_id` as `SchemeParams.extra` (`core.signatures.iyzico`); a
    ConfigError for another scheme, or for a value that is not an id of digits."""
    key = "iyzico_merchant_id"
    value: str | None = read_value(data, key, path, str, None)
    if value is None:
        return {}
    if scheme != "iyzico":
        raise ConfigError(f"{path}{key}", "is a setting of scheme 'iyzico'")
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise ConfigError(f"{path}{key}", "must be iyzico's merchant id, 1 to 20 digits")
    return {IYZICO_MERCHANT_ID: value}
