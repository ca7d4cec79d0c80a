"""Which network addresses are public: what a forward target may resolve to unless its
configuration says `allow_private`. Pure.

`ipaddress`'s `is_global` alone lets through addresses that reach inside the network:
an IPv6 address that carries an IPv4 one (NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`,
IPv4-compatible `::a.b.c.d`, IPv4-mapped `::ffff:a.b.c.d`, 6to4 `2002::/16`) is judged
by the IPv4 address it carries, and the whole of `192.0.0.0/24` (IETF protocol
assignments, some releases' `is_global` says otherwise for part of it) is not public.
Teredo (`2001::/32`) tunnels to an address the sender chooses: never public.
"""

from __future__ import annotations

import ipaddress

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IETF_PROTOCOL = ipaddress.ip_network("192.0.0.0/24")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def is_public(text: str) -> bool:
    """Whether the address `text` is globally routable, judged by the IPv4 address an
    IPv6 one carries; False for anything that is not an address."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # a zone id is link-local
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if "%" in text or address.teredo is not None:
            return False
        carried = _carried_ipv4(address)
        if carried is not None:
            return _public_ipv4(carried)
        return address.is_global and not address.is_multicast
    return _public_ipv4(address)


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _NAT64) or (
        address in _IPV4_COMPATIBLE and int(address) > 1  # :: and ::1 are not IPv4
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _public_ipv4(address: ipaddress.IPv4Address) -> bool:
    if address in _IETF_PROTOCOL:
        return False
    return address.is_global and not address.is_multicast
