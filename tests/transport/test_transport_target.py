"""Resolving inventory hosts into SSH hop chains (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from orchestrator.errors import InventoryError
from orchestrator.inventory import HostSpec, Inventory
from orchestrator.inventory.destination import parse_destination
from orchestrator.transport.target import SshTarget, resolve_target


def _inventory(**hosts: dict[str, object]) -> Inventory:
    return Inventory(hosts={name: HostSpec(**fields) for name, fields in hosts.items()})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "user", "host", "port"),
    [
        ("bastion", None, "bastion", None),
        ("ops@bastion", "ops", "bastion", None),
        ("ops@bastion:2222", "ops", "bastion", 2222),
        ("10.0.0.1:22", None, "10.0.0.1", 22),
        ("[::1]:2200", None, "::1", 2200),
        ("me@[fe80::1]", "me", "fe80::1", None),
        ("fe80::1", None, "fe80::1", None),
        ("a@b@host:7", "a@b", "host", 7),
    ],
)
def test_parse_destination(text: str, user: str | None, host: str, port: int | None) -> None:
    target = parse_destination(text)
    assert (target.user, target.host, target.port) == (user, host, port)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty jump destination"),
        ("@host", "empty user"),
        ("host:0", "port '0' is not a number from 1 to 65535"),
        ("host:http", "port 'http' is not a number"),
        ("[::1", "unclosed '['"),
        ("[::1]x", "expected ':port' after ']'"),
        ("user@", "has no host"),
    ],
)
def test_parse_destination_rejects(text: str, message: str) -> None:
    with pytest.raises(InventoryError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_destination(text)


@given(
    user=st.none() | st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True),
    host=st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
    port=st.none() | st.integers(1, 65535),
)
def test_parse_destination_round_trip(user: str | None, host: str, port: int | None) -> None:
    text = (f"{user}@" if user else "") + host + (f":{port}" if port else "")
    target = parse_destination(text)
    assert (target.user, target.host, target.port) == (user, host, port)


def test_host_without_jump_uses_its_address_or_its_name() -> None:
    inventory = _inventory(gpu1={"address": "10.0.0.5", "port": 2222, "user": "ubuntu"}, gpu2={})
    one = resolve_target("gpu1", inventory)
    assert (one.host, one.port, one.user, one.jump) == ("10.0.0.5", 2222, "ubuntu", None)
    two = resolve_target("gpu2", inventory)
    assert (two.host, two.port, two.user) == ("gpu2", None, None)  # left to ~/.ssh/config


def test_jump_chain_through_inventory_hosts_is_ordered_from_the_controller() -> None:
    inventory = _inventory(
        outer={"address": "1.1.1.1"},
        inner={"address": "10.0.0.1", "jump": "outer"},
        gpu={"address": "10.0.1.5", "jump": "inner"},
    )
    hops = resolve_target("gpu", inventory).hops()
    assert [h.name for h in hops] == ["outer", "inner", "gpu"]
    assert [h.host for h in hops] == ["1.1.1.1", "10.0.0.1", "10.0.1.5"]


def test_jump_outside_the_inventory_is_a_destination() -> None:
    target = resolve_target("gpu", _inventory(gpu={"jump": "ops@bastion.example:2200"}))
    assert target.jump == SshTarget(name="ops@bastion.example:2200", host="bastion.example", port=2200, user="ops")


@pytest.mark.parametrize(
    ("hosts", "name", "message"),
    [
        ({"a": {"jump": "l"}, "l": {"connection": "local"}}, "a", "host 'l' (jump of 'a') has connection: local"),
        ({"l": {"connection": "local"}}, "l", "host 'l' has connection: local"),
        ({"a": {}}, "zz", "no host named 'zz'"),
    ],
)
def test_bad_chains_are_inventory_errors(hosts: dict[str, dict[str, object]], name: str, message: str) -> None:
    with pytest.raises(InventoryError) as caught:
        resolve_target(name, _inventory(**hosts))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ({"a": {"jump": "a"}}, "jump hosts form a loop: a -> a"),
        ({"a": {"jump": "b"}, "b": {"jump": "a"}}, "jump hosts form a loop: a -> b -> a"),
    ],
)
def test_a_jump_loop_is_refused_where_the_inventory_is_loaded(
        hosts: dict[str, dict[str, object]], message: str) -> None:
    """At the inventory's line (the loader locates the model's error), not only once a
    connection is tried."""
    with pytest.raises(ValidationError, match=message):
        _inventory(**hosts)


def test_unknown_host_lists_the_known_ones() -> None:
    with pytest.raises(InventoryError) as caught:
        resolve_target("gpu9", _inventory(gpu1={}, gpu2={}))
    assert caught.value.hint == "known hosts: gpu1, gpu2"
