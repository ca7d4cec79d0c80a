"""`gateway sign`: a scheme with --secret, a configured provider, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from gateway import settings
from gateway.cli import main
from gateway.core.providers import get_scheme
from gateway.core.signatures import SchemeParams
from tests.support.config_file import with_urls, write_toml

ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
NOTIFICATION = {"live": "false", "notificationItems": [{"NotificationRequestItem": {
    "pspReference": "PSP1", "merchantAccountCode": "M", "eventCode": "AUTHORISATION",
    "success": "true", "amount": {"value": 100, "currency": "EUR"}}}]}  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_adyen_prints_the_body_it_signed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Adyen's signature lives in the body: the signed body is printed, and verifies."""
    body = tmp_path / "n.json"
    body.write_bytes(orjson.dumps(NOTIFICATION))
    status, out, _ = run(capsys, "sign", "adyen", "--secret", ADYEN_KEY, "--body", str(body),
                         "--json")  # fmt: skip
    assert status == 0
    signed = json.loads(out)["body"].encode()
    get_scheme("adyen").verify(SchemeParams(secrets=(ADYEN_KEY,)), {}, signed, 0.0)


def test_square_signs_the_url_given(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    body = tmp_path / "e.json"
    body.write_bytes(b'{"event_id": "e1", "type": "payment.updated"}')
    url = "https://gateway.example/webhooks/square"
    status, out, _ = run(capsys, "sign", "square", "--secret", "k", "--url", url, "--body",
                         str(body), "--json")  # fmt: skip
    assert status == 0
    headers = {k.lower(): v for k, v in json.loads(out)["headers"].items()}
    get_scheme("square").verify(SchemeParams(secrets=("k",), url=url), headers,
                                body.read_bytes(), 0.0)  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("sign", "square", "--secret", "k"), "notification_url"),
        (("sign", "hmac", "--secret", "k"), "hmac scheme needs a signature header"),
        (("sign", "stripe"), "give --secret, or name a configured --provider"),
        (("sign", "--provider", "nobody"), "no provider named 'nobody'"),
    ],
)
def test_what_cannot_be_signed_is_said_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], problem: str
) -> None:
    body = tmp_path / "e.json"
    body.write_bytes(b"{}")
    config = write_toml(tmp_path / "g.toml", with_urls({}))
    status, _, err = run(capsys, *argv, "--body", str(body), "--config", str(config))
    assert status == 2
    assert problem in err


def test_a_configured_hmac_provider_is_signed_as_it_verifies(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The generic scheme signed from the same settings the gateway verifies with."""
    doc = with_urls({"providers": {"acme": {
        "scheme": "hmac", "secrets": ["c2VjcmV0"], "key_encoding": "base64",
        "algorithm": "sha1", "header": "X-Acme", "prefix": "sha1=",
        "event_id_from": "json:/m/id", "event_type_from": "header:X-Acme-Event"}}})  # fmt: skip
    config = write_toml(tmp_path / "g.toml", doc)
    body = tmp_path / "e.json"
    body.write_bytes(b'{"m": {"id": "a1"}}')
    status, out, _ = run(capsys, "sign", "--provider", "acme", "--config", str(config),
                         "--body", str(body), "--event-type", "done", "--json")  # fmt: skip
    assert status == 0
    headers = {k.lower(): v for k, v in json.loads(out)["headers"].items()}
    assert headers["x-acme"].startswith("sha1=") and headers["x-acme-event"] == "done"
    acme = settings.load(str(config)).providers["acme"]
    get_scheme("hmac").verify(acme.params, headers, body.read_bytes(), 0.0)
