"""Comparability warnings (pure): each difference the issue lists, one case each, plus the
health of the results. Series are built from level results in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inmemory import BASE_CONFIG, level, run

from orchestrator.report.comparability import comparability_warnings
from orchestrator.report.comparison import compare
from orchestrator.report.series import Series, build_series
from orchestrator.runs.reader import HostData, RunData


def warnings_for(*runs: RunData) -> list[str]:
    return comparability_warnings(build_series(runs))


def test_identical_settings_give_no_warning() -> None:
    assert warnings_for(run("a"), run("b")) == []


CASES = [
    ("max_tokens", {"max_tokens": 128}, "max_tokens differs (a 1024, b 128)"),
    ("prompt", {"prompt": "Say hi."}, "the prompt differs (a unset, b 'Say hi.')"),
    ("dataset", {"dataset": "prompts.jsonl"}, "the prompt differs (a unset, b dataset prompts.jsonl)"),
    ("synthetic", {"input_len": 2048}, "the prompt differs (a unset, b synthetic 2048 tokens)"),
    ("endpoint", {"endpoint": "completions"}, "the endpoint differs (a 'chat', b 'completions')"),
    ("mode", {"mode": "batch"}, "the load mode differs (a 'closed', b 'batch')"),
    ("ignore_eos", {"ignore_eos": True}, "ignore_eos differs (a false, b true)"),
    ("thinking", {"thinking": False}, "thinking differs (a unset, b false)"),
    ("temperature", {"temperature": 0.7}, "the temperature differs (a unset, b 0.7)"),
]


@pytest.mark.parametrize(("case", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_setting_that_changes_the_work(case: str, change: dict[str, Any], expected: str) -> None:
    found = warnings_for(run("a"), run("b", config={**BASE_CONFIG, **change}))
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]


def test_simulated_against_real() -> None:
    sim = run("b", engine="sim", levels=[level(1, simulated=True), level(2, simulated=True)])
    found = warnings_for(run("a"), sim)
    assert len(found) == 1
    assert found[0].startswith("simulated against real: b ran on the simulator, a on real hardware")


def test_engine_differs_when_both_are_real() -> None:
    found = warnings_for(run("a"), run("b", engine="sglang"))
    assert found == ["the engine differs (a 'vllm', b 'sglang'): a different server answered"]


def test_endpoint_read_from_the_results_when_no_config_says() -> None:
    a = run("a", config={})
    b = run("b", config={}, levels=[level(1, chat=False), level(2, chat=False)])
    found = warnings_for(a, b)
    assert any(w.startswith("the endpoint differs (a 'chat', b 'completions')") for w in found), found


def test_no_common_level() -> None:
    found = warnings_for(run("a", levels=[level(1)]), run("b", levels=[level(4)]))
    assert "no load level was measured by every run: the tables have gaps only" in found


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: run("a", status="failed"), "a: the run is failed, not complete (/runs/a/20260101T000000Z-00000000)"),
        (lambda: run("a", levels=[level(1, failed=2, completed=0)]), "a: requests failed at c1 (2 failed); latencies leave them out"),
        (lambda: run("a", levels=[level(1, partial=True)]), "a: level(s) c1 were cut short (partial)"),
        (lambda: run("a", levels=[level(1), level(2, flags=["throughput_drop"])]), "a at c2: throughput fell although the load rose"),
        (
            lambda: run("a", engine="sim", levels=[{**level(1, simulated=True), "normalized": None}]),
            "a: simulated, but the results have no model-time figures; shown in wall time",
        ),
    ],
)
def test_health_of_one_run(make: Any, expected: str) -> None:
    assert expected in warnings_for(make())


def test_simulated_figures_are_compared_in_model_time() -> None:
    comparison = compare([run("a", engine="sim", levels=[level(1, simulated=True), level(2, simulated=True)])])
    series: Series = comparison.series[0]
    assert series.model_time and series.time_scale == 0.05
    assert [p.output_throughput for p in series.points] == [2.5, 5.0]
    wall = compare([comparison.series[0].run], model_time=False).series[0]
    assert [p.output_throughput for p in wall.points] == [50.0, 100.0]


def test_labels_say_the_host_and_the_stamp_when_needed() -> None:
    two_hosts = run("a")
    two_hosts.hosts.append(HostData("g", None, two_hosts.hosts[0].bench))
    assert [s.label for s in build_series([two_hosts, run("b")])] == ["a@h", "a@g", "b"]
    assert [s.label for s in build_series([run("a"), run("a")])] == ["a (20260101T000000Z)"] * 2


def test_different_sweep_ranges_name_each_run_and_its_range() -> None:
    short = run("a", levels=[level(1), level(2), level(4)])
    long = run("b", levels=[level(1), level(2), level(4), level(8), level(16)])
    assert warnings_for(short, long) == [
        "the runs swept different load ranges (a C=1..4, b C=1..16): each peak and knee is the best "
        "found within its own range, so their ratios compare different loads; the by-load tables "
        "compare like with like"
    ]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1, 2, 4], [1, 2, 4], None),  # same range
        ([1, 2, 4], [1, 4], None),  # same range, fewer levels in between
        ([2, 4], [1, 2, 4], "(a C=2..4, b C=1..4)"),  # a different start counts too
    ],
)
def test_sweep_range_is_its_lowest_and_highest_level(a: list[int], b: list[int], expected: str | None) -> None:
    found = warnings_for(run("a", levels=[level(c) for c in a]), run("b", levels=[level(c) for c in b]))
    ranges = [w for w in found if "ranges" in w]
    if expected is None:
        assert ranges == []
    else:
        assert len(ranges) == 1 and expected in ranges[0]


def test_a_level_without_a_finished_request_is_not_part_of_the_range() -> None:
    dead_top = run("b", levels=[level(1), level(2), level(4, completed=0, failed=4)])
    assert not [w for w in warnings_for(run("a", levels=[level(1), level(2)]), dead_top) if "ranges" in w]


def test_rate_ranges_are_in_requests_per_second() -> None:
    def rate(r: float) -> dict[str, Any]:
        return level(1, level=f"r{r:g}", mode="rate", request_rate=r, max_concurrency=None)

    found = warnings_for(run("a", levels=[rate(0.5), rate(2)]), run("b", levels=[rate(0.5), rate(8)]))
    assert next(w for w in found if "ranges" in w).startswith(
        "the runs swept different load ranges (a 0.5..2 req/s, b 0.5..8 req/s)"
    )


def test_a_redeploy_on_another_environment_is_flagged(tmp_path: Any) -> None:
    """The old run and its redeploy (`--locked`) side by side: the host facts and the frozen
    packages that serve are compared, and what differs is said."""
    import dataclasses

    from orchestrator.runs.layout import RunLayout

    runs = []
    for name, kernel, driver, vllm in (("old", "6.1.0", "580.95", "0.17.1"),
                                       ("new", "6.8.0", "580.95", "0.17.2")):
        base = run(name)
        folder = tmp_path / name
        freeze = RunLayout(folder).host("h").freeze
        freeze.parent.mkdir(parents=True)
        freeze.write_text(f"vllm=={vllm}\ntorch==2.10.0\nrich==14.0.0\n")
        commit = {"old": "0fd0a5e6879298d3476e3b61852a79792a35ae3d", "new": "c" * 40}[name]
        RunLayout(folder).host("h").model.write_text(json.dumps(
            {"repo": "nvidia/Kimi-K2.5-NVFP4", "revision": "main", "commit": commit, "files": []}))
        facts = {"kernel": kernel, "os": "Debian 12", "gpus": [{"name": "RTX", "driver": driver}]}
        host = dataclasses.replace(base.hosts[0], facts=facts)
        runs.append(dataclasses.replace(base, path=folder, hosts=[host]))
    found = warnings_for(*runs)
    assert "the kernel differs (old '6.1.0', new '6.8.0'): the environment is not the same" in found
    assert "vllm differs (old '0.17.1', new '0.17.2'): another build serves" in found
    assert ("the model's commit differs (old 'nvidia/Kimi-K2.5-NVFP4@0fd0a5e68792', new "
            "'nvidia/Kimi-K2.5-NVFP4@cccccccccccc'): another commit of the model answered") in found
    assert not [w for w in found if "torch" in w or "driver" in w or "rich" in w]


def test_a_level_whose_client_ran_late_warns_its_latencies_are_unreliable() -> None:
    late = run("b", levels=[level(1), level(2, flags=["latency_unreliable", "itl_batched"])])
    found = warnings_for(run("a"), late)
    assert any(w.startswith("b at c2: orch's client ran late") and "unreliable" in w for w in found), found
    assert any(w.startswith("b at c2: the median ITL is 0") for w in found), found
