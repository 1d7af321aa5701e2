"""The pure half of `orch init` (orchestrator/init/): any text a flag gives reads back from
the YAML written as itself, and the `--host` grammar."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.init.documents import render_inventory, render_plan
from orchestrator.init.spec import HostArg, InitSpec, parse_host_arg


@settings(max_examples=150, deadline=None)
@given(text=st.text(min_size=1, max_size=40))
def test_any_text_reads_back_as_itself(text: str) -> None:
    # The command refuses line breaks and `${`; the renderer must not depend on that.
    spec = InitSpec(name="p", target=HostArg("gpu1", user="u"), model=text,
                    served_model_name=text, identity_file=text, jump=text, vllm_version=text)
    plan = yaml.safe_load(render_plan(spec))
    assert plan["service"]["model"] == text and plan["vars"]["vllm_version"] == text
    host = yaml.safe_load(render_inventory(spec))["hosts"]["gpu1"]
    assert host["identity_file"] == text and host["jump"] == text


def test_host_grammar() -> None:
    assert parse_host_arg("localhost") == HostArg(None)
    assert parse_host_arg("gpu1") == HostArg("gpu1")
    assert parse_host_arg("ubuntu@gpu1.example.com:2222") == HostArg("gpu1.example.com", "ubuntu", 2222)
    assert parse_host_arg("[fe80::1]:22") == HostArg("fe80::1", None, 22)
    assert parse_host_arg("u@localhost") == HostArg("localhost", "u")  # SSH to this machine
