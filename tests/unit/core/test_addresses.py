"""Which addresses a forward target may resolve to without `allow_private`, table-driven:
the ones `ipaddress.is_global` lets through that reach inside the network are refused."""

from __future__ import annotations

import pytest

from gateway.core.forward.addresses import is_public


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("224.0.0.1", False),  # multicast
        ("192.0.0.192", False),  # IETF protocol assignments; is_global says True
        ("192.0.0.9", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:93.184.215.14", True),
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1; is_global says True
        ("64:ff9b::5db8:d70e", True),  # NAT64 of a public address
        ("64:ff9b:1::a01:203", False),  # local-use NAT64 of 10.1.2.3
        ("::127.0.0.1", False),  # IPv4-compatible; is_global says True
        ("::10.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
        ("not an address", False),
    ],
)
def test_an_address_is_public_only_if_every_address_it_carries_is(
    address: str, public: bool
) -> None:
    assert is_public(address) is public
