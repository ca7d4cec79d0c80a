"""The sending side of every signature scheme: the headers a real provider would attach.

Used by the `gateway sign` CLI helper, by tests and by load generators. Header names use
each provider's own spelling; lower-case them before handing them to a scheme's `verify`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Callable

from gateway.core.signatures import FieldRef, SchemeParams, get_scheme, standard_key
from gateway.core.signatures.base import Encoding
from gateway.core.signatures.hmac_generic import check_hmac_params

_Signer = Callable[[SchemeParams, bytes, int, str | None, str | None], dict[str, str]]


def sign(
    scheme_name: str,
    params: SchemeParams,
    body: bytes,
    now_s: int,
    event_id: str | None = None,
    event_type: str | None = None,
) -> dict[str, str]:
    """Headers signing body at now_s with the first secret in params.secrets.

    Where the scheme reads the event id from a header, event_id is sent there (a fresh
    UUID if None); where it reads the type from a header, event_type is required. Ids and
    types the scheme reads from the JSON body are the caller's to put in the body.
    Raise KeyError for an unknown scheme and ValueError for unusable arguments.
    """
    get_scheme(scheme_name)  # same KeyError as verification for an unknown name
    if not params.secrets:
        raise ValueError("params.secrets is empty; nothing to sign with")
    return _SIGNERS[scheme_name](params, body, now_s, event_id, event_type)


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _fresh_id(event_id: str | None) -> str:
    return event_id if event_id is not None else str(uuid.uuid4())


def _need_type(scheme_name: str, event_type: str | None) -> str:
    if event_type is None:
        raise ValueError(f"{scheme_name} sends the event type in a header; pass event_type")
    return event_type


def _stripe(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    mac = _mac(params.secrets[0].encode(), f"{now_s}.".encode() + body)
    return {"Stripe-Signature": f"t={now_s},v1={mac.hex()}"}


def _paddle(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    mac = _mac(params.secrets[0].encode(), f"{now_s}:".encode() + body)
    return {"Paddle-Signature": f"ts={now_s};h1={mac.hex()}"}


def _standard(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    # Standard Webhooks message ids conventionally start with msg_.
    msg_id = event_id if event_id is not None else f"msg_{uuid.uuid4().hex}"
    mac = _mac(standard_key(params.secrets[0]), f"{msg_id}.{now_s}.".encode() + body)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(now_s),
        "webhook-signature": "v1," + base64.b64encode(mac).decode("ascii"),
    }


def _github(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    mac = _mac(params.secrets[0].encode(), body)
    return {
        "X-Hub-Signature-256": "sha256=" + mac.hex(),
        "X-GitHub-Delivery": _fresh_id(event_id),
        "X-GitHub-Event": _need_type("github", event_type),
    }


def _shopify(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    mac = _mac(params.secrets[0].encode(), body)
    return {
        "X-Shopify-Hmac-Sha256": base64.b64encode(mac).decode("ascii"),
        "X-Shopify-Webhook-Id": _fresh_id(event_id),
        "X-Shopify-Topic": _need_type("shopify", event_type),
    }


def _hmac(
    params: SchemeParams, body: bytes, now_s: int, event_id: str | None, event_type: str | None
) -> dict[str, str]:
    check_hmac_params(params)
    headers: dict[str, str] = {}
    message = body
    if params.timestamp_header:
        headers[params.timestamp_header] = str(now_s)
        message = f"{now_s}.".encode() + body
    mac = _mac(params.secrets[0].encode(), message)
    encoded = mac.hex() if params.encoding is Encoding.HEX else base64.b64encode(mac).decode()
    headers[params.header] = params.prefix + encoded
    id_ref: FieldRef | None = params.event_id_from
    type_ref: FieldRef | None = params.event_type_from
    if id_ref is not None and id_ref.source == "header":
        headers[id_ref.name] = _fresh_id(event_id)
    if type_ref is not None and type_ref.source == "header":
        headers[type_ref.name] = _need_type("hmac", event_type)
    return headers


_SIGNERS: dict[str, _Signer] = {
    "stripe": _stripe,
    "standard": _standard,
    "github": _github,
    "shopify": _shopify,
    "paddle": _paddle,
    "hmac": _hmac,
}
