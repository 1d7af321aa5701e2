"""`orch report` of a matrix run: the matrix section first (the best variant for the
objective and why, the variants' table and reasons), then a plot per metric with a line per
variant labelled by its values, tokens per joule among them where the GPUs were sampled.

The matrix is made as `orch apply` makes one: each variant is the plan with its values
--set, served by its own simulator and swept into a run folder of its own (with the stand-in
nvidia-smi sampled beside), listed with a failed variant in the matrix's matrix.json.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fixtures.gpu import install
from runmaker import SIM_PLANS, Server, record_run, running_sims, sim_plan

from orchestrator.bench.gpu_telemetry import GpuSampler
from orchestrator.cli import main
from orchestrator.report.matrix import compare_matrix, matrix_table
from orchestrator.report.matrix_plots import METRICS, matrix_figure, matrix_plots, variant_lines
from orchestrator.runs import matrix_file
from orchestrator.runs.matrix_file import MatrixRecord, VariantEntry
from orchestrator.transport.local import LocalTransport

pytestmark = pytest.mark.slow

PLAN = "sim-report-matrix"
SEQS = (2, 8)  # max-num-seqs: at C=8 the first runs two at a time, the second all eight
OBJECTIVE = "p99 TTFT <= 60s at C >= 4"
FAILED_CAUSE = "the server exited during start-up: max-num-seqs must be at least 1"


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("matrix") / "runs"
    plans = [sim_plan(SIM_PLANS["kimi-nvfp4"], time_scale=0.02, concurrency=(1, 2, 4, 8),
                      sets=[f"name={PLAN}", f"service.args.max-num-seqs={seqs}", "bench.max_tokens=256",
                            "service.sim.startup_time_scale=0.001"])
             for seqs in SEQS]  # fmt: skip
    folder = matrix_file.new_folder(root, PLAN, "0" * 64)
    record = matrix_file.started(MatrixRecord(plan=PLAN, axes=["service.args.max-num-seqs"],
                                          varying=["service.args.max-num-seqs"], objective=OBJECTIVE))  # fmt: skip
    with pytest.MonkeyPatch.context() as patch, running_sims(plans) as servers:
        patch.setenv("PATH", f"{install(root.parent / 'gpu-bin')}:{os.environ['PATH']}")
        patch.setenv("FAKE_NVIDIA_SMI_RAMP_S", "0.15")
        for index, (seqs, server) in enumerate(zip(SEQS, servers, strict=True), start=1):
            gpus = GpuSampler(LocalTransport(), 0.05)
            path = record_run(root, Server(server.loaded, server.url), samplers=[gpus])
            record.variants.append(VariantEntry(
                index=index, label=f"max-num-seqs={seqs}", values={"service.args.max-num-seqs": seqs},
                sets=[f"service.args.max-num-seqs={seqs}"], status="complete", run=str(path)))  # fmt: skip
    record.variants.append(VariantEntry(index=3, label="max-num-seqs=0", values={"service.args.max-num-seqs": 0},
                                        status="failed", cause=FAILED_CAUSE))  # fmt: skip
    matrix_file.finish(folder, record, "failed")
    return folder


def test_a_plot_per_metric_with_a_line_per_variant(matrix: Path) -> None:
    compared = compare_matrix(matrix)
    assert compared.best is not None and compared.best.label == "max-num-seqs=8"
    plots = matrix_plots(compared)  # C=8 two at a time lasts long enough for nvidia-smi's samples
    assert [p.name for p in plots] == ["matrix-throughput", "matrix-latency", "matrix-ttft", "matrix-energy"]
    assert all(p.png.startswith(b"\x89PNG\r\n\x1a\n") for p in plots)
    for metric in METRICS:
        lines = variant_lines(compared, metric)
        expected = [("max-num-seqs=2", 0), ("max-num-seqs=8", 1)]
        labels = [(r.label, colour) for r, colour, _, _ in lines]
        assert labels == expected if metric.name != "matrix-energy" else labels and set(labels) <= set(expected)
        for _, _, xs, _ in lines:  # tokens per joule: the levels nvidia-smi sampled (a level
            # over before its first sample has none)
            assert xs == [1.0, 2.0, 4.0, 8.0] if metric.name != "matrix-energy" else set(xs) <= {1.0, 2.0, 4.0, 8.0}
        figure = matrix_figure(compared, metric)
        (axes,) = figure.axes
        drawn = [line for line in axes.get_lines() if line.get_linestyle() == "-"]
        assert [list(line.get_ydata()) for line in drawn] == [ys for _, _, _, ys in lines]
        legend = [t.get_text() for t in figure.legends[0].get_texts()]
        assert legend == [r.label + (" (best)" if r is compared.best else "") for r, _, _, _ in lines]
        if len(drawn) == 2:
            assert legend == ["max-num-seqs=2", "max-num-seqs=8 (best)"]
            assert drawn[1].get_linewidth() > drawn[0].get_linewidth()  # the best stands out
    throughput = {r.label: ys for r, _, _, ys in variant_lines(compared, METRICS[0])}
    assert throughput["max-num-seqs=8"][-1] > 2 * throughput["max-num-seqs=2"][-1]  # a batch of 8, not 2


def test_report_of_a_matrix_has_its_section_first(matrix: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "matrix.html"
    # the plan's name means its latest matrix run, as for orch compare
    assert main(["report", PLAN, "--runs-dir", str(matrix.parent.parent), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text()
    assert "<h1>Matrix sim-report-matrix: 3 variants of max-num-seqs</h1>" in html
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[:2] == ["Matrix", "Comparability"] and "GPU telemetry and energy" in headings
    section = html.split('<section id="matrix">')[1].split("</section>")[0]
    assert re.search(r"<p><strong>best for p99 TTFT &lt;= 60s at C &gt;= 4: max-num-seqs=8: [\d,.]+ output tok/s", section)
    assert f"3 max-num-seqs=0: failed: {FAILED_CAUSE}" in section
    assert "<strong>max-num-seqs=8</strong>" in section  # its row in the table
    for title in ("Output throughput", "Mean latency", "P99 time to first token", "Output tokens per joule"):
        assert f'alt="{title} by variant against concurrency"' in section
    # the rest of the page compares the variants by their labels, not their run ids
    assert "<th class=\"right\">max-num-seqs=2</th>" in html


def test_without_an_objective_or_slos_the_variants_rank_by_peak_throughput(
        matrix: Path, tmp_path: Path) -> None:
    """No `matrix.objective`, and the plans set no latency objective (bench.slo only has its
    attainment default): the best is the highest peak, not "no goodput recorded"."""
    record = matrix_file.read(matrix)
    plain = matrix_file.new_folder(tmp_path / "runs", PLAN, "1" * 64)
    matrix_file.finish(plain, MatrixRecord(plan=PLAN, axes=record.axes, varying=record.varying,
                                       variants=record.variants), "failed")
    compared = compare_matrix(plain)
    assert compared.basis == "peak throughput (no objective given)"
    scored = [r for r in compared.results if r.score is not None]
    assert [r.entry.label for r in scored] == ["max-num-seqs=2", "max-num-seqs=8"]
    assert all(r.reason.startswith("peak ") for r in scored)
    caption = matrix_table(compared).caption or ""
    assert caption.endswith("ranked by tok/s per GPU at each variant's peak (no objective given).")
    assert compared.best is not None and compared.best.label == max(
        scored, key=lambda r: r.score or 0.0).label
