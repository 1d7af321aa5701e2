"""What the GPU operator sees in `orch compare` and `orch report`: the GPU telemetry per
level and tokens per joule (a table, a plot), the server's gauges and the GPUs' power over
time at each run's knee level, and the load asked against the load run (a capped level said
with the figure reached, in the warnings, the JSON and the report).

Pure tests build level results with the blocks the samplers write; the real ones read the
varied run (conftest.py), whose sweep sampled the stand-in nvidia-smi (8 GPUs, GPU 5
throttling at its power limit) and whose batch limit of 4 caps C=8 and C=16.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from inmemory import level, run
from runmaker import VARIED_BATCH_LIMIT, Runs

from orchestrator.cli import main
from orchestrator.report.comparison import compare, compare_runs
from orchestrator.report.effective_table import effective_table
from orchestrator.report.energy_plots import energy_figure, energy_points
from orchestrator.report.gpu_levels import gpu_level, gpu_levels, gpu_table, telemetry_notes
from orchestrator.report.knee_timeline import knee_timelines
from orchestrator.report.plots import comparison_plots
from orchestrator.report.timeline_plots import timeline_figure
from orchestrator.runs.run_records import LevelResult

pytestmark = pytest.mark.slow


def telemetry(power: float, *, throttled: tuple[int, ...] = (), timeline: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A `gpu_telemetry` block as the sampler writes it (8 GPUs, trimmed of `gpus`)."""
    return {
        "source": "nvidia-smi", "interval_s": 1.0, "samples": 12, "window_s": 12.4, "gpu_count": 8,
        "mean_power_w": power, "max_power_w": power + 400.0, "energy_j": power * 12.4,
        "mean_util_pct": 91.5, "max_mem_used_mib": 91388.0, "max_temp_c": 88.0,
        "mean_sm_clock_mhz": 2410.0, "min_sm_clock_mhz": 1845.0,
        "throttled": bool(throttled), "throttled_gpus": list(throttled),
        "timeline": timeline or [],
    }  # fmt: skip


def gpu_run(name: str, per_joule: tuple[float, ...], **kwargs: Any) -> Any:
    levels = [
        level(c, gpu_telemetry=telemetry(2000.0 + 300 * i, throttled=(5,) if c == 8 else ()),
              output_tokens_per_joule=tpj, output_tokens_per_s_per_w=tpj * 0.9, energy_j=24800.0 + i)
        for i, (c, tpj) in enumerate(zip((1, 2, 4, 8), per_joule, strict=True))
    ]  # fmt: skip
    return run(name, levels=levels, **kwargs)


def test_a_level_gives_its_gpu_figures() -> None:
    found = gpu_level(LevelResult.model_validate(level(8, gpu_telemetry=telemetry(3914.5, throttled=(5,)),
                                                       energy_j=48539.8)))  # fmt: skip
    assert found is not None
    assert (found.level, found.concurrency, found.gpu_count, found.throttled_gpus) == ("c8", 8.0, 8, (5,))
    assert (found.mean_power_w, found.max_power_w, found.energy_j) == (3914.5, 4314.5, 48539.8)
    assert (found.max_temp_c, found.min_sm_clock_mhz, found.throttled) == (88.0, 1845.0, True)
    for block in ({"source": "none", "reason": "no nvidia-smi on the host"}, None):
        assert gpu_level(LevelResult.model_validate(level(8, gpu_telemetry=block))) is None


def test_the_gpu_table_has_a_row_per_sampled_level_and_says_who_had_none() -> None:
    none = {"source": "none", "reason": "no nvidia-smi on the host"}
    comparison = compare([gpu_run("a", (0.1, 0.2, 0.3, 0.25)),
                          run("b", levels=[level(1, gpu_telemetry=none), level(2, gpu_telemetry=none)]),
                          run("c")])  # fmt: skip
    table = gpu_table(comparison)
    assert table is not None
    header = [c.header for c in table.columns]
    assert header[:6] == ["Run", "Level", "GPUs", "Mean W", "Peak W", "Energy (J)"] and header[-1] == "Throttled"
    assert [row[:5] for row in table.rows] == [
        ["a", "c1", "8", "2,000", "2,400"], ["a", "c2", "8", "2,300", "2,700"],
        ["a", "c4", "8", "2,600", "3,000"], ["a", "c8", "8", "2,900", "3,300"]]  # fmt: skip
    assert [row[-1] for row in table.rows] == ["no", "no", "no", "GPU 5"]
    assert telemetry_notes(comparison.series) == [
        "b: no GPU telemetry (no nvidia-smi on the host)",
        "c: no GPU telemetry (none recorded: bench.gpu_telemetry off, or an older run)"]  # fmt: skip
    assert gpu_table(compare([run("c")])) is None


def test_the_energy_plot_has_a_line_per_run_with_tokens_per_joule() -> None:
    comparison = compare([gpu_run("a", (0.1, 0.2, 0.3, 0.25)), run("b"), gpu_run("c", (0.05, 0.1, 0.12, 0.13))])
    assert [(i, xs, ys) for i, xs, ys in energy_points(comparison)] == [
        (0, [1.0, 2.0, 4.0, 8.0], [0.1, 0.2, 0.3, 0.25]), (2, [1.0, 2.0, 4.0, 8.0], [0.05, 0.1, 0.12, 0.13])]
    figure = energy_figure(comparison)
    (axes,) = figure.axes
    lines = [line for line in axes.get_lines() if line.get_linestyle() == "-"]
    assert [list(line.get_ydata()) for line in lines] == [[0.1, 0.2, 0.3, 0.25], [0.05, 0.1, 0.12, 0.13]]
    rings = [line for line in axes.get_lines() if line.get_linestyle() == "None"]
    assert [(list(r.get_xdata()), list(r.get_ydata())) for r in rings] == [([4.0], [0.3]), ([8.0], [0.13])]
    assert axes.get_xscale() == "log"
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["a", "c", "ring: most tokens per joule"]
    names = [p.name for p in comparison_plots(comparison)]
    assert "energy" in names and "energy" not in [p.name for p in comparison_plots(compare([run("b")]))]


SERVER_TIMELINE = [
    {"t_s": 0.1, "running": 0.0, "waiting": 0.0, "kv_cache_usage": 0.0},
    {"t_s": 1.1, "running": 4.0, "waiting": 4.0, "kv_cache_usage": 0.42},
    {"t_s": 2.1, "running": 4.0, "waiting": 1.0, "kv_cache_usage": 0.61},
]
POWER_TIMELINE = [{"t_s": 0.3, "power_w": None}, {"t_s": 1.3, "power_w": 3900.0}, {"t_s": 2.3, "power_w": 4450.0}]


def test_the_timeline_is_the_knee_level_of_each_run_in_its_time() -> None:
    knee_level = level(4, server_metrics={"scrapes": 3, "max_running": 4.0, "timeline": SERVER_TIMELINE},
                       gpu_telemetry=telemetry(4000.0, timeline=POWER_TIMELINE))  # fmt: skip
    flat = [level(1, output_throughput=50.0), level(2, output_throughput=100.0),
            {**knee_level, "output_throughput": 200.0}, level(8, output_throughput=201.0,
            server_metrics={"scrapes": 3, "timeline": [{"t_s": 9.0, "running": 8.0}]})]  # fmt: skip
    simulated = [{**lv, "simulated": True, "time_scale": 0.5,
                  "normalized": {"time_scale": 0.5, "output_throughput": lv["output_throughput"] * 0.5}}
                 for lv in flat]  # fmt: skip
    comparison = compare([run("a", levels=flat), run("b", levels=[level(1)]), run("s", levels=simulated, engine="sim")])
    a, s = knee_timelines(comparison)  # b has no timeline at its highest level: none
    assert (a.label, a.run, a.level, a.asked, a.basis) == ("a", 0, "c4", 4.0, "knee")
    assert a.server["running"] == [(0.1, 0.0), (1.1, 4.0), (2.1, 4.0)]
    assert a.server["kv_cache_usage"][-1] == (2.1, 0.61)
    assert a.power_w == [(1.3, 3900.0), (2.3, 4450.0)]  # a round without every GPU's power left out
    assert (s.run, s.level) == (2, "c4") and s.power_w == [(2.6, 3900.0), (4.6, 4450.0)]  # model time: t / 0.5
    figure = timeline_figure(comparison)
    kv, running, waiting, power = figure.axes
    assert [ax.get_title() for ax in figure.axes] == [
        "KV-cache usage", "Running requests", "Waiting requests", "GPU power (all GPUs)"]
    assert list(kv.get_lines()[0].get_ydata()) == [0.0, 42.0, 61.0]  # in percent
    asked = [line for line in running.get_lines() if line.get_linestyle() == ":"]
    assert [list(line.get_ydata()) for line in asked] == [[4.0, 4.0], [4.0, 4.0]]  # the concurrency asked
    assert list(waiting.get_lines()[0].get_ydata()) == [0.0, 4.0, 1.0]
    assert list(power.get_lines()[1].get_xdata()) == [2.6, 4.6]
    no_power = compare([run("a", levels=[{**knee_level, "gpu_telemetry": None}])])
    assert len(timeline_figure(no_power).axes) == 3


def test_effective_concurrency_in_the_table_json_and_warnings() -> None:
    gauges = {"scrapes": 6, "max_running": 4.0, "max_waiting": 4.0}
    seen = {"asked": 8, "client_in_flight": 8.0, "max_running": 4.0, "max_waiting": 4.0, "scrapes": 6}
    comparison = compare([run("a", levels=[
        level(4, server_metrics={**gauges, "max_waiting": 0.0}),
        level(8, server_metrics=gauges, flags=["capped"], effective_concurrency=seen)])])  # fmt: skip
    c4, c8 = comparison.baseline.points
    assert c4.capped is None and c4.effective_concurrency == {
        "asked": 4, "client_in_flight": None, "max_running": 4.0, "max_waiting": 0.0, "scrapes": 6}
    assert c8.effective_concurrency == seen and c8.capped == "8 asked, at most 4 running, 4 waiting"
    assert ("a at c8: 8 asked, at most 4 running, 4 waiting: the server ran fewer requests at once than "
            "the load asked for (capped)") in comparison.warnings
    levels = comparison.to_json()["series"][0]["levels"]
    assert [lv["effective_concurrency"]["max_running"] for lv in levels] == [4.0, 4.0]
    assert [lv["capped"] for lv in levels] == [None, "8 asked, at most 4 running, 4 waiting"]
    table = effective_table(comparison)
    assert table is not None
    assert table.rows == [["a", "c4", "4", "-", "4", "0", "6", "no"],
                          ["a", "c8", "8", "8", "4", "4", "6", "8 asked, at most 4 running, 4 waiting"]]
    assert effective_table(compare([run("b")])) is None


# -- real runs ----------------------------------------------------------------------------


def test_the_varied_run_recorded_its_gpus_and_its_caps(runs: Runs) -> None:
    comparison = compare_runs([runs.sim["minimax-m2.5"], runs.varied])
    pivot, varied = comparison.series
    # a level shorter than nvidia-smi's start-up (C=1 lasts about 0.1 s) may have no sample;
    # the longest (C=16, about 0.4 s) has several
    sampled = gpu_levels(varied)
    assert sampled and sampled[-1].level == "c16"
    assert all(g.gpu_count == 8 and (g.mean_power_w or 0) > 0 and (g.energy_j or 0) > 0 for g in sampled)
    assert gpu_levels(pivot) == [] and telemetry_notes(comparison.series) == [
        "sim-minimax-m2.5: no GPU telemetry (none recorded: bench.gpu_telemetry off, or an older run)"]
    # tokens per joule: the level's own figure, in model time like the throughput beside it
    per_joule = {p.level: v for p in varied.points if (v := p.throughputs.get("output_tokens_per_joule"))}
    assert set(per_joule) == {g.level for g in sampled} and all(v > 0 for v in per_joule.values())
    capped = {p.level: p.capped for p in varied.points if p.capped}
    assert set(capped) <= {"c8", "c16"} and capped  # a batch of 4 caps what asks for more
    for label, words in capped.items():
        asked = int(label[1:])
        assert words.startswith(f"{asked} asked, at most {VARIED_BATCH_LIMIT} running")
        assert f"sim-minimax-varied at {label}: {words}: the server ran fewer" in " ".join(comparison.warnings)
    timelines = knee_timelines(comparison)
    assert [t.label for t in timelines] == ["sim-minimax-m2.5", "sim-minimax-varied"]
    assert timelines[0].power_w == []  # only the varied host had GPUs
    assert bool(timelines[1].power_w) == (timelines[1].level in per_joule)
    assert all(t.server["running"] for t in timelines)
    assert max(v for _, v in timelines[1].server["running"]) <= VARIED_BATCH_LIMIT
    names = [p.name for p in comparison_plots(comparison)]
    assert names[-5:] == ["itl", "energy", "cdf", "server", "timeline"]


def test_compare_json_and_warnings_carry_the_load_run(runs: Runs, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["compare", str(runs.varied), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    levels = {lv["level"]: lv for lv in data["series"][0]["levels"]}
    assert levels["c16"]["effective_concurrency"]["asked"] == 16
    assert levels["c16"]["effective_concurrency"]["max_running"] <= VARIED_BATCH_LIMIT
    assert levels["c16"]["throughputs"]["output_tokens_per_joule"] > 0
    assert main(["compare", str(runs.varied)]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert any(re.match(r"warning: sim-minimax-varied at c(8|16): \d+ asked, at most 4 running, \d+ waiting: "
                        r"the server ran fewer requests at once than the load asked for \(capped\)", w)
               for w in warnings), warnings  # fmt: skip
    assert "Energy by load" in out


def test_the_report_shows_the_gpus_the_knee_over_time_and_the_caps(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "gpu.html"
    assert main(["report", str(runs.sim["minimax-m2.5"]), str(runs.varied), "-o", str(out)]) == 0
    html = out.read_text()

    def section(anchor: str) -> str:
        return html.split(f'<section id="{anchor}">')[1].split("</section>")[0]

    gpus = section("gpus")
    assert "<h2>GPU telemetry and energy</h2>" in gpus
    assert "<caption>Energy by load</caption>" in gpus and "<caption>GPU telemetry by level</caption>" in gpus
    assert 'alt="Output tokens per joule against concurrency"' in gpus
    rows = gpus.count("<tr><td class=\"left\">sim-minimax-varied</td>")
    assert rows == len(gpu_levels(compare_runs([runs.varied]).baseline)) >= 1
    assert "sim-minimax-m2.5: no GPU telemetry" in gpus
    assert "Energy by load" not in section("levels")  # shown once, beside the GPU figures
    server = section("server")
    assert 'alt="Through each run&#x27;s knee level' in server
    assert "sim-minimax-varied: c" in server and "<caption>Load asked against load run</caption>" in server
    assert re.search(r"<strong>\d+ asked, at most 4 running, \d+ waiting</strong>", server)
    assert "at most 4 running" in section("warnings")
