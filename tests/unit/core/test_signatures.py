"""Table-driven tests of the signature schemes.

Every vector is made by `tests.support.vectors`, written from the providers' documentation
and independent of the code under test; each scheme's own `sign` is only exercised by
the round-trip tests at the end. Time is always passed in, never read from the clock.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass

import pytest

from gateway.core.providers import PROVIDERS, get_scheme
from gateway.core.signatures import (
    Encoding,
    FieldRef,
    Scheme,
    SchemeParams,
    require_headers,
    standard_key,
)
from gateway.errors import (
    SignatureError,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
    TimestampOutOfWindow,
)
from tests.support.vectors import (
    generic_b64,
    generic_hex,
    github_sha256,
    paddle_h1,
    shopify_b64,
    standard_v1,
    stripe_v1,
)

NOW = 1_700_000_000
BODY = b'{"id":"evt_1","event_id":"evt_1","type":"payment.succeeded","event_type":"paid"}'
TAMPERED = BODY.replace(b"evt_1", b"evt_2")

# Secrets for the schemes keyed with the secret's UTF-8 bytes.
A = "whsec_current-secret-4f1c"
B = "whsec_previous-secret-9d2e"
WRONG = "whsec_attacker-guess-0000"

# Standard Webhooks secrets are base64 keys behind a `whsec_` label.
STD_A = "whsec_" + base64.b64encode(b"standard current key 0123").decode()
STD_B = "whsec_" + base64.b64encode(b"standard previous key 456").decode()
STD_WRONG = "whsec_" + base64.b64encode(b"standard attacker key 789").decode()

MSG_ID = "msg_2b7RkZ"


@dataclass(frozen=True)
class Case:
    """One verification: inputs and the exact error expected (None for acceptance)."""

    scheme: str
    params: SchemeParams
    headers: dict[str, str]
    body: bytes = BODY
    now_s: float = NOW
    raises: type[SignatureError] | None = None


def case(
    intent: str,
    scheme: str,
    params: SchemeParams,
    headers: dict[str, str],
    *,
    body: bytes = BODY,
    now_s: float = NOW,
    raises: type[SignatureError] | None = None,
) -> object:
    """A parametrize entry whose id is the one-sentence intent of the case."""
    return pytest.param(Case(scheme, params, headers, body, now_s, raises), id=intent)


# --- stripe --------------------------------------------------------------------------

STRIPE = SchemeParams(secrets=(A,))
STRIPE_ROTATING = SchemeParams(secrets=(B, A))


def stripe(*parts: str) -> dict[str, str]:
    return {"stripe-signature": ",".join(parts)}


def v1(secret: str, t: int = NOW, body: bytes = BODY) -> str:
    return "v1=" + stripe_v1(secret, t, body)


STRIPE_CASES = [
    case(
        "stripe: a v1 signature by the secret is accepted",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(A)),
    ),
    case(
        "stripe: upper-case hex is the same signature",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(A).upper().replace("V1=", "v1=")),
    ),
    case(
        "stripe: a changed body no longer matches",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(A)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "stripe: a signature by another secret is rejected",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(WRONG)),
        raises=SignatureMismatch,
    ),
    case(
        "stripe: the key is the whole whsec_ string, not the part after the prefix",
        "stripe",
        STRIPE,
        {"stripe-signature": f"t={NOW},v1=" + stripe_v1(A.removeprefix("whsec_"), NOW, BODY)},
        raises=SignatureMismatch,
    ),
    case(
        "stripe: during rotation the second configured secret is accepted",
        "stripe",
        STRIPE_ROTATING,
        stripe(f"t={NOW}", v1(A)),
    ),
    case(
        "stripe: one matching v1 among several is enough",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(WRONG), v1(A)),
    ),
    case(
        "stripe: v0 signatures are ignored even when they would match",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", "v0=" + stripe_v1(A, NOW, BODY), v1(WRONG)),
        raises=SignatureMismatch,
    ),
    case(
        "stripe: a v0 entry that is not even hex does not spoil a good v1",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", "v0=not-hex", v1(A)),
    ),
    case(
        "stripe: a timestamp changed after signing does not match",
        "stripe",
        STRIPE,
        stripe(f"t={NOW - 1}", v1(A)),
        raises=SignatureMismatch,
    ),
    case(
        "stripe: a signature exactly tolerance_s old is still accepted",
        "stripe",
        STRIPE,
        stripe(f"t={NOW - 300}", v1(A, NOW - 300)),
    ),
    case(
        "stripe: a genuine signature one second past the window is stale",
        "stripe",
        STRIPE,
        stripe(f"t={NOW - 301}", v1(A, NOW - 301)),
        raises=TimestampOutOfWindow,
    ),
    case(
        "stripe: a genuine signature from beyond the window in the future is refused",
        "stripe",
        STRIPE,
        stripe(f"t={NOW + 301}", v1(A, NOW + 301)),
        raises=TimestampOutOfWindow,
    ),
    case(
        "stripe: a configured tolerance_s replaces the default",
        "stripe",
        dataclasses.replace(STRIPE, tolerance_s=10),
        stripe(f"t={NOW - 11}", v1(A, NOW - 11)),
        raises=TimestampOutOfWindow,
    ),
    case(
        "stripe: the window is checked before the signature is compared",
        "stripe",
        STRIPE,
        stripe(f"t={NOW - 3600}", v1(WRONG, NOW - 3600)),
        raises=TimestampOutOfWindow,
    ),
    case("stripe: no header at all", "stripe", STRIPE, {}, raises=SignatureMissing),
    case(
        "stripe: a blank header counts as missing",
        "stripe",
        STRIPE,
        {"stripe-signature": "  "},
        raises=SignatureMissing,
    ),
    case(
        "stripe: a header that is not key=value pairs is malformed",
        "stripe",
        STRIPE,
        {"stripe-signature": "garbage"},
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a header without t= is malformed",
        "stripe",
        STRIPE,
        stripe(v1(A)),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: two t= values are ambiguous and so malformed",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", f"t={NOW}", v1(A)),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a non-numeric t= is malformed",
        "stripe",
        STRIPE,
        stripe("t=yesterday", v1(A)),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a header with no v1 is malformed",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}"),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a v1 that is not hex is malformed",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", "v1=zz" + "0" * 62),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a truncated v1 is malformed",
        "stripe",
        STRIPE,
        stripe(f"t={NOW}", v1(A)[:-2]),
        raises=SignatureMalformed,
    ),
    case(
        "stripe: a malformed signature is reported before a stale timestamp",
        "stripe",
        STRIPE,
        stripe(f"t={NOW - 3600}", "v1=nothex"),
        raises=SignatureMalformed,
    ),
]

# --- standard webhooks ---------------------------------------------------------------

STANDARD = SchemeParams(secrets=(STD_A,))


def std(signature: str, msg_id: str = MSG_ID, timestamp: int | str = NOW) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def sv1(secret: str, msg_id: str = MSG_ID, t: int = NOW, body: bytes = BODY) -> str:
    return "v1," + standard_v1(secret, msg_id, t, body)


def without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != name}


STANDARD_CASES = [
    case(
        "standard: a v1 signature by the secret is accepted", "standard", STANDARD, std(sv1(STD_A))
    ),
    case(
        "standard: a secret configured without its whsec_ label is the same key",
        "standard",
        SchemeParams(secrets=(STD_A.removeprefix("whsec_"),)),
        std(sv1(STD_A)),
    ),
    case(
        "standard: a changed body no longer matches",
        "standard",
        STANDARD,
        std(sv1(STD_A)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "standard: the message id is signed, so swapping it breaks the signature",
        "standard",
        STANDARD,
        std(sv1(STD_A), msg_id="msg_other"),
        raises=SignatureMismatch,
    ),
    case(
        "standard: the timestamp is signed, so changing it breaks the signature",
        "standard",
        STANDARD,
        std(sv1(STD_A), timestamp=NOW - 1),
        raises=SignatureMismatch,
    ),
    case(
        "standard: a signature by another secret is rejected",
        "standard",
        STANDARD,
        std(sv1(STD_WRONG)),
        raises=SignatureMismatch,
    ),
    case(
        "standard: the key is the decoded secret, not its UTF-8 text",
        "standard",
        STANDARD,
        std("v1," + generic_b64(STD_A, f"{MSG_ID}.{NOW}.".encode() + BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "standard: during rotation the second configured secret is accepted",
        "standard",
        SchemeParams(secrets=(STD_B, STD_A)),
        std(sv1(STD_A)),
    ),
    case(
        "standard: one matching v1 in a space-separated list is enough",
        "standard",
        STANDARD,
        std(f"{sv1(STD_WRONG)} {sv1(STD_A)}"),
    ),
    case(
        "standard: other versions such as v1a are skipped",
        "standard",
        STANDARD,
        std(f"v1a,bm90IGFuIGVkMjU1MTkgc2lnbmF0dXJl {sv1(STD_A)}"),
    ),
    case(
        "standard: a list with only other versions has nothing to check",
        "standard",
        STANDARD,
        std("v1a,bm90IGFuIGVkMjU1MTkgc2lnbmF0dXJl"),
        raises=SignatureMalformed,
    ),
    case(
        "standard: a genuine signature one second past the window is stale",
        "standard",
        STANDARD,
        std(sv1(STD_A, t=NOW - 301), timestamp=NOW - 301),
        raises=TimestampOutOfWindow,
    ),
    case(
        "standard: a genuine signature from beyond the window in the future is refused",
        "standard",
        STANDARD,
        std(sv1(STD_A, t=NOW + 301), timestamp=NOW + 301),
        raises=TimestampOutOfWindow,
    ),
    case(
        "standard: a timestamp just inside the future edge is accepted",
        "standard",
        STANDARD,
        std(sv1(STD_A, t=NOW + 300), timestamp=NOW + 300),
    ),
    case(
        "standard: no webhook-id header",
        "standard",
        STANDARD,
        without(std(sv1(STD_A)), "webhook-id"),
        raises=SignatureMissing,
    ),
    case(
        "standard: no webhook-timestamp header",
        "standard",
        STANDARD,
        without(std(sv1(STD_A)), "webhook-timestamp"),
        raises=SignatureMissing,
    ),
    case(
        "standard: no webhook-signature header",
        "standard",
        STANDARD,
        without(std(sv1(STD_A)), "webhook-signature"),
        raises=SignatureMissing,
    ),
    case(
        "standard: a signature entry without a version label is malformed",
        "standard",
        STANDARD,
        std(standard_v1(STD_A, MSG_ID, NOW, BODY)),
        raises=SignatureMalformed,
    ),
    case(
        "standard: a v1 value that is not base64 is malformed",
        "standard",
        STANDARD,
        std("v1,***not-base64***"),
        raises=SignatureMalformed,
    ),
    case(
        "standard: an ISO date instead of Unix seconds is malformed",
        "standard",
        STANDARD,
        std(sv1(STD_A), timestamp="2023-11-14T22:13:20Z"),
        raises=SignatureMalformed,
    ),
]

# --- github --------------------------------------------------------------------------

GITHUB = SchemeParams(secrets=(A,))


def gh(value: str) -> dict[str, str]:
    return {"x-hub-signature-256": value}


GITHUB_CASES = [
    case(
        "github: a sha256 signature by the secret is accepted",
        "github",
        GITHUB,
        gh("sha256=" + github_sha256(A, BODY)),
    ),
    case(
        "github: no timestamp is signed, so the clock does not matter",
        "github",
        GITHUB,
        gh("sha256=" + github_sha256(A, BODY)),
        now_s=0,
    ),
    case(
        "github: a changed body no longer matches",
        "github",
        GITHUB,
        gh("sha256=" + github_sha256(A, BODY)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "github: a signature by another secret is rejected",
        "github",
        GITHUB,
        gh("sha256=" + github_sha256(WRONG, BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "github: during rotation the second configured secret is accepted",
        "github",
        SchemeParams(secrets=(B, A)),
        gh("sha256=" + github_sha256(A, BODY)),
    ),
    case(
        "github: a repeated header joined with a comma is accepted if one value matches",
        "github",
        GITHUB,
        gh(f"sha256={github_sha256(WRONG, BODY)}, sha256={github_sha256(A, BODY)}"),
    ),
    case("github: no signature header", "github", GITHUB, {}, raises=SignatureMissing),
    case(
        "github: the legacy SHA-1 header alone does not count",
        "github",
        GITHUB,
        {"x-hub-signature": "sha1=" + "0" * 40},
        raises=SignatureMissing,
    ),
    case(
        "github: a bare hex value without sha256= is malformed",
        "github",
        GITHUB,
        gh(github_sha256(A, BODY)),
        raises=SignatureMalformed,
    ),
    case(
        "github: a value that is not hex is malformed",
        "github",
        GITHUB,
        gh("sha256=" + "g" * 64),
        raises=SignatureMalformed,
    ),
]

# --- shopify -------------------------------------------------------------------------

SHOPIFY = SchemeParams(secrets=(A,))


def sh(value: str) -> dict[str, str]:
    return {"x-shopify-hmac-sha256": value}


SHOPIFY_CASES = [
    case(
        "shopify: a base64 signature by the secret is accepted",
        "shopify",
        SHOPIFY,
        sh(shopify_b64(A, BODY)),
    ),
    case(
        "shopify: a changed body no longer matches",
        "shopify",
        SHOPIFY,
        sh(shopify_b64(A, BODY)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "shopify: a signature by another secret is rejected",
        "shopify",
        SHOPIFY,
        sh(shopify_b64(WRONG, BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "shopify: during rotation the second configured secret is accepted",
        "shopify",
        SchemeParams(secrets=(B, A)),
        sh(shopify_b64(A, BODY)),
    ),
    case(
        "shopify: a repeated header joined with a comma is accepted if one value matches",
        "shopify",
        SHOPIFY,
        sh(f"{shopify_b64(WRONG, BODY)}, {shopify_b64(A, BODY)}"),
    ),
    case("shopify: no signature header", "shopify", SHOPIFY, {}, raises=SignatureMissing),
    case(
        "shopify: a value that is not base64 is malformed",
        "shopify",
        SHOPIFY,
        sh("***"),
        raises=SignatureMalformed,
    ),
    case(
        "shopify: a hex digest decodes to the wrong length and is malformed",
        "shopify",
        SHOPIFY,
        sh(github_sha256(A, BODY)),
        raises=SignatureMalformed,
    ),
]

# --- paddle --------------------------------------------------------------------------

PADDLE = SchemeParams(secrets=(A,))


def pd(*parts: str) -> dict[str, str]:
    return {"paddle-signature": ";".join(parts)}


def h1(secret: str, ts: int = NOW, body: bytes = BODY) -> str:
    return "h1=" + paddle_h1(secret, ts, body)


PADDLE_CASES = [
    case(
        "paddle: an h1 signature by the secret is accepted",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}", h1(A)),
    ),
    case(
        "paddle: a changed body no longer matches",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}", h1(A)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "paddle: a signature by another secret is rejected",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}", h1(WRONG)),
        raises=SignatureMismatch,
    ),
    case(
        "paddle: the timestamp is joined with a colon, so a Stripe-style dot does not match",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}", "h1=" + stripe_v1(A, NOW, BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "paddle: during rotation the second configured secret is accepted",
        "paddle",
        SchemeParams(secrets=(B, A)),
        pd(f"ts={NOW}", h1(A)),
    ),
    case(
        "paddle: one matching h1 among several (Paddle's own rotation) is enough",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}", h1(WRONG), h1(A)),
    ),
    case(
        "paddle: a genuine signature one second past the window is stale",
        "paddle",
        PADDLE,
        pd(f"ts={NOW - 301}", h1(A, NOW - 301)),
        raises=TimestampOutOfWindow,
    ),
    case(
        "paddle: a genuine signature from beyond the window in the future is refused",
        "paddle",
        PADDLE,
        pd(f"ts={NOW + 301}", h1(A, NOW + 301)),
        raises=TimestampOutOfWindow,
    ),
    case("paddle: no signature header", "paddle", PADDLE, {}, raises=SignatureMissing),
    case(
        "paddle: a header without ts= is malformed",
        "paddle",
        PADDLE,
        pd(h1(A)),
        raises=SignatureMalformed,
    ),
    case(
        "paddle: a header with no h1 is malformed",
        "paddle",
        PADDLE,
        pd(f"ts={NOW}"),
        raises=SignatureMalformed,
    ),
    case(
        "paddle: comma-separated like Stripe is not Paddle's format",
        "paddle",
        PADDLE,
        {"paddle-signature": f"ts={NOW},{h1(A)}"},
        raises=SignatureMalformed,
    ),
]

# --- generic hmac --------------------------------------------------------------------

# Hex with a prefix, no timestamp; the id comes from a header.
HMAC_HEX = SchemeParams(
    secrets=(A,),
    header="X-Signature",
    encoding=Encoding.HEX,
    prefix="sha256=",
    event_id_from=FieldRef.parse("header:X-Event-Id"),
    event_type_from=FieldRef.parse("json:type"),
)
# Base64 with a timestamp header; the id comes from the body.
HMAC_TS = SchemeParams(
    secrets=(A,),
    header="X-Sig",
    encoding=Encoding.BASE64,
    timestamp_header="X-Timestamp",
    event_id_from=FieldRef.parse("json:id"),
    event_type_from=FieldRef.parse("header:X-Event-Type"),
)


def hx(value: str) -> dict[str, str]:
    return {"x-signature": value}


def hts(value: str, ts: int | str = NOW) -> dict[str, str]:
    return {"x-sig": value, "x-timestamp": str(ts)}


def b64_at(secret: str, ts: int = NOW, body: bytes = BODY) -> str:
    return generic_b64(secret, str(ts).encode() + b"." + body)


HMAC_CASES = [
    case(
        "hmac: a prefixed hex signature of the body is accepted",
        "hmac",
        HMAC_HEX,
        hx("sha256=" + generic_hex(A, BODY)),
    ),
    case(
        "hmac: a timestamped base64 signature of `{ts}.{body}` is accepted",
        "hmac",
        HMAC_TS,
        hts(b64_at(A)),
    ),
    case(
        "hmac: a changed body no longer matches",
        "hmac",
        HMAC_HEX,
        hx("sha256=" + generic_hex(A, BODY)),
        body=TAMPERED,
        raises=SignatureMismatch,
    ),
    case(
        "hmac: with a timestamp header, a body-only signature does not match",
        "hmac",
        HMAC_TS,
        hts(generic_b64(A, BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "hmac: a signature by another secret is rejected",
        "hmac",
        HMAC_HEX,
        hx("sha256=" + generic_hex(WRONG, BODY)),
        raises=SignatureMismatch,
    ),
    case(
        "hmac: during rotation the second configured secret is accepted",
        "hmac",
        dataclasses.replace(HMAC_HEX, secrets=(B, A)),
        hx("sha256=" + generic_hex(A, BODY)),
    ),
    case(
        "hmac: one matching signature in a comma-separated list is enough",
        "hmac",
        HMAC_HEX,
        hx(f"sha256={generic_hex(WRONG, BODY)},sha256={generic_hex(A, BODY)}"),
    ),
    case(
        "hmac: one matching signature in a space-separated list is enough",
        "hmac",
        HMAC_TS,
        hts(f"{b64_at(WRONG)} {b64_at(A)}"),
    ),
    case(
        "hmac: a genuine signature one second past the window is stale",
        "hmac",
        HMAC_TS,
        hts(b64_at(A, NOW - 301), NOW - 301),
        raises=TimestampOutOfWindow,
    ),
    case(
        "hmac: a genuine signature from beyond the window in the future is refused",
        "hmac",
        HMAC_TS,
        hts(b64_at(A, NOW + 301), NOW + 301),
        raises=TimestampOutOfWindow,
    ),
    case(
        "hmac: without a timestamp header the clock does not matter",
        "hmac",
        HMAC_HEX,
        hx("sha256=" + generic_hex(A, BODY)),
        now_s=0,
    ),
    case("hmac: no signature header", "hmac", HMAC_HEX, {}, raises=SignatureMissing),
    case(
        "hmac: the configured timestamp header is missing",
        "hmac",
        HMAC_TS,
        {"x-sig": b64_at(A)},
        raises=SignatureMissing,
    ),
    case(
        "hmac: a value without the configured prefix is malformed",
        "hmac",
        HMAC_HEX,
        hx(generic_hex(A, BODY)),
        raises=SignatureMalformed,
    ),
    case(
        "hmac: base64 where hex is configured is malformed",
        "hmac",
        HMAC_HEX,
        hx("sha256=" + generic_b64(A, BODY)),
        raises=SignatureMalformed,
    ),
    case(
        "hmac: a non-numeric timestamp is malformed",
        "hmac",
        HMAC_TS,
        hts(b64_at(A), "now"),
        raises=SignatureMalformed,
    ),
]

ALL_CASES = STRIPE_CASES + STANDARD_CASES + GITHUB_CASES + SHOPIFY_CASES + PADDLE_CASES + HMAC_CASES


@pytest.mark.parametrize("c", ALL_CASES)
def test_verify(c: Case) -> None:
    scheme = get_scheme(c.scheme)
    if c.raises is None:
        scheme.verify(c.params, c.headers, c.body, c.now_s)
        return
    with pytest.raises(SignatureError) as info:
        scheme.verify(c.params, c.headers, c.body, c.now_s)
    # The exact class matters: it becomes the stored error_class and the operator's clue.
    assert type(info.value) is c.raises
    message = str(info.value)
    for secret in c.params.secrets:
        assert secret not in message
        assert secret.removeprefix("whsec_") not in message
    assert c.body.decode() not in message


# --- published vectors ---------------------------------------------------------------

# From the Standard Webhooks reference libraries' tests.
STD_REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
STD_REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
STD_REF_TS = 1614265330
STD_REF_BODY = b'{"test": 2432232314}'
STD_REF_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

# From GitHub's "Validating webhook deliveries" page.
GH_REF_SECRET = "It's a Secret to Everybody"
GH_REF_BODY = b"Hello, World!"
GH_REF_SIG = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_independent_helpers_reproduce_published_vectors() -> None:
    """If these fail, the test helpers (not the gateway) misread the specs."""
    assert "v1," + standard_v1(STD_REF_SECRET, STD_REF_ID, STD_REF_TS, STD_REF_BODY) == (
        STD_REF_SIG
    )
    assert "sha256=" + github_sha256(GH_REF_SECRET, GH_REF_BODY) == GH_REF_SIG


def test_standard_accepts_the_published_vector() -> None:
    headers = {
        "webhook-id": STD_REF_ID,
        "webhook-timestamp": str(STD_REF_TS),
        "webhook-signature": STD_REF_SIG,
    }
    params = SchemeParams(secrets=(STD_REF_SECRET,))
    get_scheme("standard").verify(params, headers, STD_REF_BODY, STD_REF_TS)
    # The same genuine request replayed much later is refused.
    with pytest.raises(TimestampOutOfWindow):
        get_scheme("standard").verify(params, headers, STD_REF_BODY, STD_REF_TS + 3600)


def test_github_accepts_the_published_vector() -> None:
    params = SchemeParams(secrets=(GH_REF_SECRET,))
    headers = {"x-hub-signature-256": GH_REF_SIG}
    get_scheme("github").verify(params, headers, GH_REF_BODY, 0)
    with pytest.raises(SignatureMismatch):
        get_scheme("github").verify(params, headers, b"Hello, World?", 0)


# --- registry, refs and configuration helpers ----------------------------------------


def test_registry_holds_every_scheme_under_its_own_name() -> None:
    assert {"stripe", "standard", "github", "shopify", "paddle", "razorpay", "hmac"} <= set(
        PROVIDERS
    )
    for name, provider in PROVIDERS.items():
        assert provider.name == provider.scheme.name == name
        assert get_scheme(name) is provider.scheme


def test_unknown_scheme_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        get_scheme("hmac-sha1")


@pytest.mark.parametrize(
    ("name", "params", "id_ref", "type_ref", "in_body"),
    [
        pytest.param(
            "stripe", STRIPE, "json:id", "json:type", True, id="stripe ids live in the body"
        ),
        pytest.param(
            "standard",
            STANDARD,
            "header:webhook-id",
            "json:type",
            False,
            id="standard ids are the signed webhook-id header",
        ),
        pytest.param(
            "github",
            GITHUB,
            "header:x-github-delivery",
            "header:x-github-event",
            False,
            id="github ids and types are headers",
        ),
        pytest.param(
            "shopify",
            SHOPIFY,
            "header:x-shopify-webhook-id",
            "header:x-shopify-topic",
            False,
            id="shopify ids and topics are headers",
        ),
        pytest.param(
            "paddle",
            PADDLE,
            "json:event_id",
            "json:event_type",
            True,
            id="paddle ids live in the body as event_id",
        ),
        pytest.param(
            "hmac",
            HMAC_HEX,
            "header:x-event-id",
            "json:type",
            False,
            id="hmac refs come from params; a header id means the body does not carry it",
        ),
        pytest.param(
            "hmac",
            HMAC_TS,
            "json:id",
            "header:x-event-type",
            True,
            id="hmac with a json id ref carries its id in the body",
        ),
    ],
)
def test_id_and_type_refs(
    name: str, params: SchemeParams, id_ref: str, type_ref: str, in_body: bool
) -> None:
    scheme = get_scheme(name)
    assert scheme.id_ref(params) == FieldRef.parse(id_ref)
    assert scheme.type_ref(params) == FieldRef.parse(type_ref)
    # Where the id lives decides whether an unparseable body is a 400.
    assert (scheme.id_ref(params).source == "json") is in_body


def test_hmac_without_a_header_is_a_configuration_error() -> None:
    params = dataclasses.replace(HMAC_HEX, header="")
    with pytest.raises(ValueError, match="header"):
        get_scheme("hmac").verify(params, hx("sha256=" + generic_hex(A, BODY)), BODY, NOW)


def test_hmac_without_an_id_ref_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="event_id_from"):
        get_scheme("hmac").id_ref(dataclasses.replace(HMAC_HEX, event_id_from=None))


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param("whsec_not base64!", id="characters outside the base64 alphabet"),
        pytest.param("whsec_abcde", id="wrong padding"),
        pytest.param("whsec_", id="nothing after the label"),
    ],
)
def test_standard_key_rejects_a_secret_that_is_not_base64(secret: str) -> None:
    with pytest.raises(ValueError) as info:
        standard_key(secret)
    if encoded := secret.removeprefix("whsec_"):
        assert encoded not in str(info.value)


def test_standard_key_strips_the_label() -> None:
    assert standard_key(STD_REF_SECRET) == base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert standard_key(STD_REF_SECRET) == standard_key(STD_REF_SECRET.removeprefix("whsec_"))


# --- signing round trips ------------------------------------------------------------

# One row per scheme (two for hmac); the first secret is the current one, the second the
# one being rotated out. Every scheme in the registry must have a row.
ROUND_TRIP = [
    pytest.param("stripe", SchemeParams(secrets=(A, B)), id="stripe"),
    pytest.param("stripe_thin", SchemeParams(secrets=(A, B)), id="stripe_thin"),
    pytest.param("nowpayments", SchemeParams(secrets=(A, B)), id="nowpayments"),
    pytest.param("standard", SchemeParams(secrets=(STD_A, STD_B)), id="standard"),
    pytest.param("github", SchemeParams(secrets=(A, B)), id="github"),
    pytest.param("shopify", SchemeParams(secrets=(A, B)), id="shopify"),
    pytest.param("paddle", SchemeParams(secrets=(A, B)), id="paddle"),
    pytest.param("razorpay", SchemeParams(secrets=(A, B)), id="razorpay"),
    pytest.param("checkout", SchemeParams(secrets=(A, B)), id="checkout"),
    pytest.param("paystack", SchemeParams(secrets=(A, B)), id="paystack"),
    pytest.param("square", SchemeParams(secrets=(A, B), url="https://gw.example/wh"), id="square"),
    pytest.param("gocardless", SchemeParams(secrets=(A, B)), id="gocardless"),
    pytest.param("mollie_events", SchemeParams(secrets=(A, B)), id="mollie_events"),
    pytest.param("hmac", dataclasses.replace(HMAC_HEX, secrets=(A, B)), id="hmac hex, prefix"),
    pytest.param("hmac", dataclasses.replace(HMAC_TS, secrets=(A, B)), id="hmac b64, timestamp"),
]


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def signed(name: str, params: SchemeParams, body: bytes = BODY) -> dict[str, str]:
    """The lower-cased headers `name` signs body with, id evt_1 and type paid, at NOW."""
    scheme = get_scheme(name)
    return lower(scheme.sign(params, body, NOW, event_id="evt_1", event_type="paid"))


#: Schemes that sign inside the body (Adyen): their round trips are their own module's.
SIGNED_IN_BODY = frozenset(name for name, p in PROVIDERS.items() if p.sign_body is not None)


#: Schemes that verify with a fetched certificate (PayPal): their round trips, with the
#: certificate, are their own module's (tests/unit/core/providers/test_paypal.py).
CERTIFIED = frozenset(name for name, p in PROVIDERS.items() if p.certificate is not None)


#: Schemes whose webhooks are unsigned and confirmed by a fetch (Mollie's classic): there
#: is no signature to round-trip (tests/unit/core/providers/test_mollie.py).
UNSIGNED = frozenset(
    name
    for name, p in PROVIDERS.items()
    if p.confirmation is not None and not p.scheme.signature_headers(SchemeParams(("s",)))
)


#: Schemes that sign chosen fields of their own body shape, not any body (iyzico): their
#: round trips are their own module's (tests/unit/core/providers/test_iyzico.py).
FIELD_SIGNED = frozenset({"iyzico"})


def test_every_scheme_has_a_round_trip_row() -> None:
    assert {row.values[0] for row in ROUND_TRIP} == (
        set(PROVIDERS) - SIGNED_IN_BODY - CERTIFIED - UNSIGNED - FIELD_SIGNED
    )


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_what_a_scheme_signs_it_verifies(name: str, params: SchemeParams) -> None:
    """Signed with the current secret and checked against both: accepted."""
    scheme = get_scheme(name)
    headers = signed(name, params)
    scheme.verify(params, headers, BODY, NOW)
    # The id and type a scheme reads from headers are the ones asked for.
    if scheme.id_ref(params).source == "header":
        assert headers[scheme.id_ref(params).name] == "evt_1"
    if scheme.type_ref(params).source == "header":
        assert headers[scheme.type_ref(params).name] == "paid"


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_a_sender_still_on_the_old_secret_is_accepted_during_rotation(
    name: str, params: SchemeParams
) -> None:
    """Signed with the secret being rotated out (second in the list): still accepted."""
    old_secret_only = dataclasses.replace(params, secrets=params.secrets[1:])
    get_scheme(name).verify(params, signed(name, old_secret_only), BODY, NOW)


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_a_tampered_body_fails_the_round_trip(name: str, params: SchemeParams) -> None:
    """The body changed after signing: a mismatch, not any other error."""
    with pytest.raises(SignatureMismatch):
        get_scheme(name).verify(params, signed(name, params), TAMPERED, NOW)


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_sign_uses_only_the_first_secret(name: str, params: SchemeParams) -> None:
    """Signed with both secrets configured, the old one alone does not verify it."""
    old_secret_only = dataclasses.replace(params, secrets=params.secrets[1:])
    with pytest.raises(SignatureMismatch):
        get_scheme(name).verify(old_secret_only, signed(name, params), BODY, NOW)


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_sign_refuses_empty_secrets(name: str, params: SchemeParams) -> None:
    with pytest.raises(ValueError, match="secrets is empty"):
        get_scheme(name).sign(dataclasses.replace(params, secrets=()), BODY, NOW, event_id="e")


def test_sign_matches_the_independent_helpers() -> None:
    """The signers and the test helpers agree byte for byte on every fixed scheme."""
    got = get_scheme("stripe").sign(STRIPE, BODY, NOW)
    assert got == {"Stripe-Signature": f"t={NOW},{v1(A)}"}
    got = get_scheme("paddle").sign(PADDLE, BODY, NOW)
    assert got == {"Paddle-Signature": f"ts={NOW};{h1(A)}"}
    got = get_scheme("standard").sign(STANDARD, BODY, NOW, event_id=MSG_ID)
    assert got == std(sv1(STD_A))
    got = get_scheme("github").sign(GITHUB, BODY, NOW, event_id="d-1", event_type="ping")
    assert got == {
        "X-Hub-Signature-256": "sha256=" + github_sha256(A, BODY),
        "X-GitHub-Delivery": "d-1",
        "X-GitHub-Event": "ping",
    }
    got = get_scheme("shopify").sign(SHOPIFY, BODY, NOW, event_id="s-1", event_type="orders/paid")
    assert got == {
        "X-Shopify-Hmac-Sha256": shopify_b64(A, BODY),
        "X-Shopify-Webhook-Id": "s-1",
        "X-Shopify-Topic": "orders/paid",
    }
    got = get_scheme("hmac").sign(HMAC_TS, BODY, NOW, event_type="paid")
    assert got == {"X-Timestamp": str(NOW), "X-Sig": b64_at(A), "x-event-type": "paid"}


def test_sign_reproduces_the_standard_published_vector() -> None:
    params = SchemeParams(secrets=(STD_REF_SECRET,))
    got = get_scheme("standard").sign(params, STD_REF_BODY, STD_REF_TS, event_id=STD_REF_ID)
    assert got["webhook-signature"] == STD_REF_SIG


@pytest.mark.parametrize(
    ("name", "params", "argument"),
    [
        pytest.param("standard", STANDARD, "event_id", id="standard signs its message id"),
        pytest.param("github", GITHUB, "event_id", id="github sends a delivery id header"),
        pytest.param("github", GITHUB, "event_type", id="github sends an event header"),
        pytest.param("shopify", SHOPIFY, "event_id", id="shopify sends a webhook id header"),
        pytest.param("shopify", SHOPIFY, "event_type", id="shopify sends a topic header"),
        pytest.param("hmac", HMAC_HEX, "event_id", id="hmac with a header id ref"),
        pytest.param("hmac", HMAC_TS, "event_type", id="hmac with a header type ref"),
    ],
)
def test_sign_needs_what_the_scheme_sends_in_a_header(
    name: str, params: SchemeParams, argument: str
) -> None:
    """Sign invents nothing: a header value the scheme sends must be given."""
    given = {"event_id": "evt_1", "event_type": "paid"}
    del given[argument]
    with pytest.raises(ValueError, match=f"pass {argument}"):
        get_scheme(name).sign(params, BODY, NOW, **given)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        pytest.param("stripe", STRIPE, id="stripe reads both from the body"),
        pytest.param("paddle", PADDLE, id="paddle reads both from the body"),
    ],
)
def test_sign_needs_neither_where_the_body_carries_both(name: str, params: SchemeParams) -> None:
    get_scheme(name).verify(params, lower(get_scheme(name).sign(params, BODY, NOW)), BODY, NOW)


UUID_TEXT = "0b3e5f1c-8d2a-4c7e-9f10-2a3b4c5d6e7f"


@pytest.mark.parametrize(
    ("scheme", "expected"),
    [
        pytest.param(get_scheme("standard"), "msg_0b3e5f1c8d2a4c7e9f102a3b4c5d6e7f", id="standard"),
        *(
            pytest.param(scheme, UUID_TEXT, id=name)
            for name, scheme in {n: p.scheme for n, p in PROVIDERS.items()}.items()
            if name != "standard" and name not in SIGNED_IN_BODY | UNSIGNED
        ),
    ],
)
def test_new_event_id_shapes_the_randomness_it_is_given(scheme: Scheme, expected: str) -> None:
    """Standard Webhooks ids read msg_ + hex; the others are the UUID as given (Adyen's
    psp references and Mollie's payment ids: their own modules' tests)."""
    assert scheme.new_event_id(UUID_TEXT) == expected


# --- required headers: what the gateway checks before reading the body ----------------------


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
def test_required_headers_are_exactly_those_whose_absence_is_signature_missing(
    name: str, params: SchemeParams
) -> None:
    """Every header a scheme names as required is one it signs, and dropping it makes
    `verify` say `SignatureMissing`; dropping any other signed header does not, so the
    early check refuses nothing `verify` would have let through as another error."""
    scheme = get_scheme(name)
    headers = signed(name, params)
    required = scheme.required_headers(params)
    assert required and set(required) <= set(headers)
    for header in headers:
        rest = {k: v for k, v in headers.items() if k != header}
        if header in required:
            with pytest.raises(SignatureMissing):
                scheme.verify(params, rest, BODY, NOW)
        else:
            try:
                scheme.verify(params, rest, BODY, NOW)
            except SignatureMissing:
                pytest.fail(f"{name}: {header} is not required yet its absence is missing")
            except SignatureError:
                pass


@pytest.mark.parametrize(("name", "params"), ROUND_TRIP)
@pytest.mark.parametrize("value", [None, "", "   "])
def test_require_headers_refuses_a_missing_or_blank_one(
    name: str, params: SchemeParams, value: str | None
) -> None:
    """The early check treats a blank header as missing, as `verify` does."""
    scheme = get_scheme(name)
    headers = signed(name, params)
    require_headers(headers, scheme.required_headers(params))
    for header in scheme.required_headers(params):
        changed = {k: v for k, v in headers.items() if k != header}
        if value is not None:
            changed[header] = value
        with pytest.raises(SignatureMissing, match=header):
            require_headers(changed, scheme.required_headers(params))
