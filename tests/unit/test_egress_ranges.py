"""The webhook address check refuses every address that is not a public receiver, including
the ranges Python's ipaddress tables count as global: IPv6 outside 2000::/3 (site-local
fec0::/10 among them), the IPv6 documentation range 3fff::/20 and the 6to4 relay anycast
192.88.99.0/24. Public addresses still pass."""

from __future__ import annotations

import ipaddress

import pytest

from memworker.sessions import egress

NOT_PUBLIC = ["fec0::1", "feff::1", "fec0:1234::5", "3fff::1", "3fff:fff::1", "192.88.99.1", "4000::1", "e000::1"]
PUBLIC = ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_ranges_python_counts_as_global_are_refused(address: str) -> None:
    assert not egress.is_public(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(egress.Refused):
        egress.check(f"http://{host}/hook", egress.Allow(), resolve=lambda h, p: [ipaddress.ip_address(address)])


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_still_pass(address: str) -> None:
    assert egress.is_public(ipaddress.ip_address(address))


def test_an_operator_may_still_allow_an_internal_range() -> None:
    allow = egress.Allow.parse("fec0::/10")
    target = egress.check("http://[fec0::1]/hook", allow, resolve=lambda h, p: [ipaddress.ip_address("fec0::1")])
    assert str(target.address) == "fec0::1"
