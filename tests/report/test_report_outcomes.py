"""How the requests ended, per level: failures by kind, finish reasons, and goodput when
the run had latency objectives; in memory, then from real runs (answers cut at max_tokens
under a TTFT objective, and an engine that crashed mid-sweep)."""

from __future__ import annotations

import re

import pytest
from inmemory import level, run
from runmaker import VARIED_MAX_TOKENS, Runs

from orchestrator.report.comparison import compare, compare_runs
from orchestrator.report.outcome_table import counts, outcome_table

pytestmark = pytest.mark.slow


def test_counts_put_the_most_frequent_first() -> None:
    assert counts({"length": 8, "stop": 120, "abort": 8}) == "stop 120, abort 8, length 8"
    assert counts({}) == ""


def test_the_table_shows_failures_by_kind_and_finish_reasons() -> None:
    a = run("a", levels=[level(1, finish_reasons={"stop": 1}),
                         level(2, completed=1, failed=1, errors={"timeout": 1}, finish_reasons={"length": 1})])  # fmt: skip
    b = run("b", levels=[level(1, finish_reasons={"stop": 1})])
    table = outcome_table(compare([a, b]))
    assert [c.group for c in table.columns[1:]] == ["failed", "failed", "finish reasons", "finish reasons"]
    assert table.rows == [["1", "0", "0", "stop 1", "stop 1"], ["2", "1 (timeout 1)", "-", "length 1", "-"]]
    assert "Goodput" not in table.caption  # no SLOs, no goodput column


def test_without_any_failure_the_caption_says_so_instead_of_a_column_of_zeros() -> None:
    table = outcome_table(compare([run("a", levels=[level(1, finish_reasons={"stop": 1})])]))
    assert [c.group for c in table.columns[1:]] == ["finish reasons"]
    assert table.rows == [["1", "stop 1"]]
    assert table.caption.startswith("No request failed. Finish reasons: of the successful requests")


def test_goodput_appears_when_any_level_has_it() -> None:
    a = run("a", levels=[level(1, request_goodput=2.0), level(2, request_goodput=None)])
    b = run("b", levels=[level(1, request_goodput=3.0), level(2, request_goodput=1.5)])
    table = outcome_table(compare([a, b]))
    assert [c.group for c in table.columns[1:]] == ["finish reasons"] * 2 + ["goodput (req/s)"] * 2
    assert [row[-2:] for row in table.rows] == [["2.00", "3.00 (1.50x)"], ["-", "1.50"]]
    assert (0, 4) in table.strong  # the higher goodput is the better one


def test_real_runs_say_how_their_requests_ended(runs: Runs) -> None:
    table = outcome_table(compare_runs([runs.sim["minimax-m2.5"], runs.varied, runs.crashed]))
    rows = {row[0]: row[1:] for row in table.rows}
    failed, reasons, goodput = rows["4"][:3], rows["4"][3:6], rows["4"][6:]
    # the crashed engine: C=4's requests still in flight got its error event (two, or one
    # when a loaded machine let a third finish before the crash)
    assert failed[:2] == ["0", "0"] and re.match(r"[12] \(stream_error:", failed[2]), failed
    assert reasons[0].startswith("stop")  # the pivot answers in full
    assert reasons[1] == "length 4"  # every answer is longer than the varied run's 64 tokens
    assert VARIED_MAX_TOKENS == 64
    assert goodput[0] == "-" and goodput[1] != "-"  # only the varied run had an objective
    assert rows["16"][:3] == ["-", "0", "-"]  # only the varied run swept that far


def test_a_failed_level_shows_what_the_server_said_most_often() -> None:
    said = "HTTP 400 Bad Request: the request exceeds the available context size"
    a = run("a", levels=[level(1, completed=0, failed=8, errors={"http_400": 8},
                               error_messages=[{"kind": "http_400", "message": said, "count": 8}])])
    table = outcome_table(compare([a]))
    assert table.rows[0][1] == f"8 (http_400 8: {said})"
    assert "what the server said most often" in table.caption
