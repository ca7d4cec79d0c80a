"""Backfill trusts only the provider: an `api_url` that is not https (without the test
flag) or not on the provider's host allow-list stops start-up with one line; a
redirect is never followed, so the API key never reaches the host it names; a TLS
certificate that is not trusted is refused at once, not retried."""

from __future__ import annotations

import asyncio
import copy
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway import settings as settings_mod
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window
from gateway.errors import ProviderApiCertificate, ProviderApiRedirected
from gateway.wiring.backfill import backfill_parts
from tests.support.gateway import config
from tests.support.provider_apis import (
    API_KEY,
    redirect,
    running_apis,
    stand_in_keys,
    stripe_event,
)

NOW = datetime.now(UTC).replace(microsecond=0)
WINDOW = Window(NOW - timedelta(hours=1), NOW)
ENV = {"PROVIDER_API_KEY": API_KEY}


def stripe_settings(doc: dict[str, Any], **keys: Any) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    doc["providers"]["stripe"] |= keys
    return settings_mod.parse(doc, env=ENV)


async def run(settings: settings_mod.Settings) -> BackfillReport:
    async with backfill_parts(settings, "stripe") as parts:
        return await backfill(parts, WINDOW)


def toml(doc: dict[str, Any]) -> str:
    lines = [
        f'[database]\nurl = "{doc["database"]["url"]}"',
        f'[nats]\nurl = "{doc["nats"]["url"]}"',
    ]
    for name, p in doc["providers"].items():
        lines.append(f"[providers.{name}]")
        for key, value in p.items():
            shown = str(value).lower() if isinstance(value, bool) else repr(value)
            lines.append(f"{key} = {shown}".replace("'", '"'))
    return "\n".join(lines) + "\n"


def test_an_http_api_url_is_refused_at_start_up_with_one_line(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """`gateway backfill` with `api_url = "http://..."` and no `insecure_api_url` exits 2
    before any request, with one line naming the key."""
    doc = {
        "database": {"url": database_url},
        "nats": {"url": nats_url},
        "providers": {
            "stripe": {
                "scheme": "stripe",
                "secrets": ["whsec_x"],
                "api_key_env": "PROVIDER_API_KEY",
                "api_url": "http://api.stripe.com",
            }
        },
    }
    path = tmp_path / "gateway.toml"
    path.write_text(toml(doc), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "backfill", "stripe", "--since", "1h"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PROVIDER_API_KEY": API_KEY, "GATEWAY_CONFIG": str(path), "PATH": "/usr/bin"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "providers.stripe.api_url" in lines[0] and "https" in lines[0]
    assert "insecure_api_url" in lines[0]


async def test_the_test_flag_is_warned_about_at_start_up(
    database_url: str, nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_apis() as apis:
        settings = stripe_settings(config(database_url, nats_url), **stand_in_keys(apis.url))
        with caplog.at_level(logging.WARNING, logger="gateway.wiring.backfill"):
            await run(settings)
    warned = [r for r in caplog.records if "insecure_api_url" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING


async def test_a_redirect_to_another_host_is_not_followed(database_url: str, nats_url: str) -> None:
    """The API answers 302 to another host (`localhost`, another port): the run stops with
    one line naming it, and the other host never sees a request, let alone the key."""
    async with running_apis() as apis, running_apis() as elsewhere:
        elsewhere.stripe_events = [stripe_event(1, NOW - timedelta(minutes=5), merchant="m_x")]
        target = f"http://localhost:{elsewhere.port}/v1/events?limit=100"
        apis.faults = [redirect(target, 302)]
        settings = stripe_settings(config(database_url, nats_url), **stand_in_keys(apis.url))
        with pytest.raises(ProviderApiRedirected, match=f"localhost:{elsewhere.port}") as refused:
            await run(settings)
        assert "\n" not in str(refused.value)
        assert elsewhere.requests == [] and elsewhere.authorizations == []
        assert apis.authorizations == [f"Bearer {API_KEY}"]


async def test_the_key_is_sent_to_the_api_host_only(database_url: str, nats_url: str) -> None:
    """Each request of a run, every page included, goes to `api_url` with the key."""
    async with running_apis() as apis:
        apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=30 - n)) for n in range(5)]
        settings = stripe_settings(config(database_url, nats_url), **stand_in_keys(apis.url))
        report = await run(settings)
    assert report.tally.recovered == 5
    assert len(apis.authorizations) == 3  # three pages of two
    assert set(apis.authorizations) == {f"Bearer {API_KEY}"}


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no trust store holds."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {made.stderr[-200:]!r}")
    return str(cert), str(key)


async def test_an_untrusted_certificate_is_refused_at_once(
    database_url: str, nats_url: str, self_signed: tuple[str, str]
) -> None:
    """An https stand-in on an allowed host with a self-signed certificate: the run
    stops on its first call with one line, instead of retrying a network error."""
    async with running_apis(tls=self_signed) as apis:
        apis.stripe_events = [stripe_event(1, NOW - timedelta(minutes=5))]
        keys = {"api_key_env": "PROVIDER_API_KEY", "api_url": apis.url, "api_hosts": ["127.0.0.1"]}
        settings = stripe_settings(config(database_url, nats_url), **keys)
        with pytest.raises(ProviderApiCertificate, match="certificate is not trusted"):
            await asyncio.wait_for(run(settings), timeout=20)
    assert apis.requests == []  # the handshake failed: no request, no key
