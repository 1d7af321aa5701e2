"""`orch diagnose LOGFILE`: rich output, exit codes, JSON, unreadable files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import main

FLASHINFER = (
    "(Worker_TP0 pid=41601) ERROR 03-02 09:14:49 [multiproc_executor.py:863] RuntimeError: "
    "flashinfer-cubin version (0.6.3) does not match flashinfer version (0.6.4). Please install "
    "the same version of both packages. Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this "
    "check.\n"
    "(APIServer pid=41210) RuntimeError: Engine core initialization failed. See root cause "
    "above. Failed core proc(s): {'EngineCore_DP0': 1}\n"
)


def test_recognised_crash_prints_cause_fix_evidence_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "service.log"
    log.write_text("(APIServer pid=1) INFO starting\n" * 50 + FLASHINFER)
    assert main(["diagnose", str(log)]) == 0
    out = capsys.readouterr().out
    assert "error: flashinfer-cubin-mismatch" in out
    assert "flashinfer-cubin 0.6.3 does not match flashinfer-python 0.6.4" in out
    assert "pin flashinfer-cubin==0.6.4 in install.packages" in " ".join(out.split())
    assert "INFO starting" not in out  # no tail when something was recognised


def test_unrecognised_log_says_so_shows_the_tail_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "service.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert main(["diagnose", str(log), "--lines", "5"]) == 1
    out = capsys.readouterr().out
    assert "No known crash signature" in out
    assert "Last 5 lines:" in out and "line 99" in out and "line 94" not in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "service.log"
    log.write_text(FLASHINFER)
    assert main(["diagnose", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["recognised"] is True and data["tail"] == []
    (diagnosis,) = data["diagnoses"]
    assert diagnosis["key"] == "flashinfer-cubin-mismatch"
    assert diagnosis["details"] == {
        "package": "flashinfer-cubin", "installed": "0.6.3", "flashinfer": "0.6.4"
    }


def test_missing_file_is_a_clear_error_without_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "diagnose", str(tmp_path / "nope.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "cannot read the log file" in result.stderr and "No such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_stdin_through_the_real_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "diagnose", "-"],
        input=FLASHINFER,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "flashinfer-cubin-mismatch" in result.stdout


def test_engine_option_reads_the_log_by_that_engines_signatures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An SGLang log is diagnosed by SGLang's crash texts, not vLLM's."""
    log = tmp_path / "sglang.log"
    log.write_text("[2026-11-30 09:00:01] Load weight begin.\n"
                   "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                   "Current value: mem_fraction_static=0.5\n")
    assert main(["diagnose", str(log), "--json"]) == 1  # vLLM's signatures do not know it
    capsys.readouterr()
    assert main(["diagnose", str(log), "--engine", "sglang", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["diagnoses"]
    assert [d["key"] for d in found if d["level"] == "error"] == ["kv_pool"]
