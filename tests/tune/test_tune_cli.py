"""`orch tune`'s usage errors, before anything runs: an SLO or objective that does not read,
a plan without `tune:`, a --resume folder that is no tune. Each is one clear line and exit
64, no traceback, no tune folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import orch

PLAN = {"name": "tc", "hosts": "localhost",
        "python": {"venv": "/tmp/orch-tc/venv", "interpreter": "python3", "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8123},
        "tune": {"service.args.max-num-seqs": [8, 16]}}


@pytest.mark.parametrize(("args", "said"), [
    (["--slo", "p99_ttft<=2"], "--slo: 'p99_ttft<=2': no unit; give s or ms (2s, 60ms)"),
    (["--slo", "p99_ttfx<=2s"], "--slo: 'p99_ttfx<=2s': unknown metric 'ttfx'; one of"),
    (["--slo", "p99_ttft>=2s"], "an SLO is an upper limit on a latency: use <= or <, not >="),
    (["--slo", "p99_ttft<=2s", "--objective", "ttft"], "--objective: unknown objective 'ttft'"),
    ([], "no SLO: give --slo (e.g. --slo 'p99_ttft<=2s,p99_tpot<=60ms') or tune.slo"),
    (["--slo", "p99_ttft<=2s", "--resume", "nowhere"], "--resume nowhere: not a tune folder"),
    (["--slo", "p99_ttft<=2s", "--trials", "0"], "expected a number of trials of at least 1"),
    (["--slo", "p99_ttft<=2s", "--set", "tune=null"], "the plan has no tune: section"),
])
def test_usage_errors_are_one_line_and_exit_64(tmp_path: Path, args: list[str], said: str) -> None:
    plan = tmp_path / "tc.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    done = orch("tune", plan, *args, cwd=tmp_path, timeout=60)
    assert done.returncode == 64, done.stdout + done.stderr
    assert said in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_tune_value_that_makes_no_valid_plan_is_an_error_at_its_axis(tmp_path: Path) -> None:
    plan = tmp_path / "tc.yaml"
    plan.write_text("name: tc\nhosts: localhost\npython: {venv: /tmp/orch-tc/venv}\n"
                    "service: {engine: sim, model: m, backend: process, port: 8123}\ntune:\n"
                    "  service.args.max-num-seqs: [8, 16]\n  service.port: [8000, abc]\n")
    checked = orch("validate", plan, cwd=tmp_path, timeout=60)
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1, checked.stdout + checked.stderr
    error = 'tc.yaml:7: tune: service.port="abc" makes no valid plan: service.port: expected ' \
            "an integer, got the string 'abc'"
    assert error in said, said
    tuned = orch("tune", plan, "--slo", "p99_ttft<=2s", cwd=tmp_path, timeout=60)
    assert tuned.returncode == 1 and error in " ".join(tuned.stderr.split()), tuned.stderr
    assert not (tmp_path / "runs").exists()
    plan.write_text(plan.read_text().replace("abc", "8001"))
    checked = orch("validate", plan, cwd=tmp_path, timeout=60)
    assert checked.returncode == 0 and "tune: 4 values checked" in checked.stdout, checked.stdout
