"""`[tracing]`: off by default, turned on by the file or the standard OTEL_* variables,
and a bad value stops start-up naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.errors import ConfigError
from tests.unit.settings.test_settings import ENV, with_change


def parsed(path: str, value: Any, **env: str) -> settings.TracingSettings:
    return settings.parse(with_change(path, value), {**ENV, **env}).tracing


def test_off_by_default() -> None:
    """No endpoint, no variable: no tracing, and the defaults the README gives."""
    tracing = parsed("tracing.endpoint", ...)
    assert not tracing.enabled
    assert (tracing.sample_ratio, tracing.service_name, tracing.trust_incoming) == (
        1.0,
        "",
        False,
    )


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),  # a base URL
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://c.example/v1/traces", "https://c.example/v1/traces"),  # already the path
    ],
)
def test_the_endpoint_turns_tracing_on(endpoint: str, url: str) -> None:
    """An endpoint turns it on; the exporter posts to its `/v1/traces`."""
    tracing = parsed("tracing.endpoint", endpoint)
    assert tracing.enabled and tracing.traces_url == url


def test_the_standard_variables_work_too() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME and OTEL_TRACES_SAMPLER_ARG win over
    the file; the traces-only endpoint wins over the base one."""
    tracing = parsed(
        "tracing.endpoint",
        "http://file:4318",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://env:4318",
        OTEL_SERVICE_NAME="payments-gw",
        OTEL_TRACES_SAMPLER_ARG="0.25",
    )
    assert (tracing.traces_url, tracing.service_name, tracing.sample_ratio) == (
        "http://env:4318/v1/traces",
        "payments-gw",
        0.25,
    )
    both = parsed(
        "tracing.endpoint",
        ...,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://env:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://traces:4318/v1/traces",
    )
    assert both.traces_url == "http://traces:4318/v1/traces"


def test_otel_sdk_disabled_keeps_it_off() -> None:
    """The SDK's own off switch is honoured over every endpoint."""
    tracing = parsed("tracing.endpoint", "http://file:4318", OTEL_SDK_DISABLED="true")
    assert not tracing.enabled


def test_a_ratio_of_zero_is_allowed() -> None:
    """0 keeps no new trace (a sampled parent is still followed)."""
    assert parsed("tracing.sample_ratio", 0).sample_ratio == 0.0


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        ("tracing.sample_ratio", 1.5, "tracing.sample_ratio"),
        ("tracing.sample_ratio", -0.1, "tracing.sample_ratio"),
        ("tracing.endpoint", "collector:4318", "tracing.endpoint"),
        ("tracing.endpoint", "grpc://collector:4317", "tracing.endpoint"),
        ("tracing.endpoit", "http://c:4318", "tracing.endpoit"),  # strict: a typo stops
        ("tracing.trust_incoming", "yes", "tracing.trust_incoming"),
    ],
)
def test_a_bad_value_names_its_key(path: str, value: Any, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parsed(path, value)
    assert key in str(raised.value)


def test_a_bad_sampler_variable_names_it() -> None:
    with pytest.raises(ConfigError) as raised:
        parsed("tracing.endpoint", ..., OTEL_TRACES_SAMPLER_ARG="half")
    assert "OTEL_TRACES_SAMPLER_ARG" in str(raised.value)


def test_the_endpoint_is_never_echoed() -> None:
    """A collector URL may carry a credential: neither the error nor the repr shows it."""
    with pytest.raises(ConfigError) as raised:
        parsed("tracing.endpoint", "ftp://user:hunter2@c")
    assert "hunter2" not in str(raised.value)
    assert "hunter2" not in repr(parsed("tracing.endpoint", "http://user:hunter2@c:4318"))
