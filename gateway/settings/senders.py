"""Who may send events: webhook providers (signature schemes and their secrets) and
internal services (bearer tokens and the subjects they may publish to), read from the
`[providers.*]` and `[services.*]` tables with errors that name the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.signatures import SCHEMES, check_hmac_params, standard_key
from gateway.core.signatures.base import Encoding, FieldRef, SchemeParams
from gateway.errors import ConfigError
from gateway.settings.values import read_value, require_positive

#: The scheme names a provider may use: the signature registry's, in its order.
SCHEME_NAMES: tuple[str, ...] = tuple(SCHEMES)


@dataclass(frozen=True)
class ProviderSettings:
    """One webhook sender: its name, signature scheme and verification parameters."""

    name: str
    scheme: str
    params: SchemeParams


@dataclass(frozen=True)
class ServiceSettings:
    """One internal publisher: its bearer token and the subjects it may publish to."""

    name: str
    token: str
    subjects: tuple[str, ...]

    def __repr__(self) -> str:  # never print the token
        return f"ServiceSettings(name={self.name!r}, subjects={self.subjects!r})"


def _secret_list(data: Mapping[str, Any], path: str, env: Mapping[str, str]) -> tuple[str, ...]:
    secrets: list[str] = []
    if "secrets" in data:
        raw = data["secrets"]
        if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
            raise ConfigError(f"{path}secrets", "must be a list of non-empty strings")
        secrets.extend(raw)
    if "secret_env" in data:
        name = data["secret_env"]
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}secret_env", "must name an environment variable")
        value = env.get(name)
        if not value:
            raise ConfigError(f"{path}secret_env", f"environment variable {name} is not set")
        # One variable may carry several secrets during a rotation, separated by spaces.
        secrets.extend(value.split())
    if not secrets:
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


def parse_provider(name: str, data: Mapping[str, Any], env: Mapping[str, str]) -> ProviderSettings:
    path = f"providers.{name}."
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"providers.{name}", "name must be letters, digits, '-' or '_'")
    scheme = read_value(data, "scheme", path, str, None)
    if scheme is None:
        raise ConfigError(f"{path}scheme", f"is required (one of {', '.join(SCHEME_NAMES)})")
    if scheme not in SCHEME_NAMES:
        raise ConfigError(
            f"{path}scheme", f"unknown scheme {scheme!r} (one of {', '.join(SCHEME_NAMES)})"
        )
    secrets = _secret_list(data, path, env)
    tolerance_s = read_value(data, "tolerance_s", path, int, 300)
    require_positive(tolerance_s, f"{path}tolerance_s")
    encoding_text = read_value(data, "encoding", path, str, "hex")
    try:
        encoding = Encoding(encoding_text)
    except ValueError:
        raise ConfigError(f"{path}encoding", "must be 'hex' or 'base64'") from None
    params = SchemeParams(
        secrets=secrets,
        tolerance_s=tolerance_s,
        header=read_value(data, "header", path, str, "").lower(),
        encoding=encoding,
        prefix=read_value(data, "prefix", path, str, ""),
        timestamp_header=read_value(data, "timestamp_header", path, str, "").lower(),
        event_id_from=_field_ref(data, "event_id_from", path),
        event_type_from=_field_ref(data, "event_type_from", path),
    )
    if scheme == "hmac":
        for key, value in (
            ("header", params.header),
            ("event_id_from", params.event_id_from),
            ("event_type_from", params.event_type_from),
        ):
            if not value:
                raise ConfigError(f"{path}{key}", "is required for scheme 'hmac'")
        try:
            check_hmac_params(params)
        except ValueError as exc:
            raise ConfigError(f"{path}prefix", str(exc)) from None
    if scheme == "standard":
        for secret in secrets:
            try:
                standard_key(secret)
            except ValueError:
                raise ConfigError(f"{path}secrets", "must be 'whsec_' + base64 key") from None
    return ProviderSettings(name=name, scheme=scheme, params=params)


def parse_service(name: str, data: Mapping[str, Any], env: Mapping[str, str]) -> ServiceSettings:
    path = f"services.{name}."
    token = read_value(data, "token", path, str, None)
    if token is None and "token_env" in data:
        var = read_value(data, "token_env", path, str, "")
        token = env.get(var)
        if not token:
            raise ConfigError(f"{path}token_env", f"environment variable {var} is not set")
    if not token:
        raise ConfigError(f"{path}token", "is required (or token_env)")
    subjects = data.get("subjects")
    if (
        not isinstance(subjects, list)
        or not subjects
        or not all(isinstance(s, str) for s in subjects)
    ):
        raise ConfigError(f"{path}subjects", "must be a non-empty list of subject patterns")
    return ServiceSettings(name=name, token=token, subjects=tuple(subjects))
