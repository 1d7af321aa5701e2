"""A plan's `matrix:` made into variants (pure, no host): the product with exclude and
include, `--set matrix=...`, each variant a whole plan validated before anything runs (an
invalid one is a located error naming it), the labels, the run order that installs and
restarts least, `--limit-variants`, and the objective's grammar."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import zygote

from orchestrator.errors import PlanError, UsageError
from orchestrator.matrix.expand import load_matrix, run_order, transition
from orchestrator.matrix.preview import changes, history
from orchestrator.matrix.run import select
from orchestrator.plan.models.objective import ObjectiveError, parse_objective

BASE: dict[str, Any] = {
    "name": "mx",
    "vars": {"version": "1"},
    "python": {"venv": "/tmp/orch-mx/venv-${vars.version}", "interpreter": "python3",
               "installer": "pip"},
    "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8123},
}


def write(tmp_path: Path, matrix: Any, **more: Any) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({**BASE, **more, "matrix": matrix}, sort_keys=False))
    return path


def labels(path: Path, sets: list[str] | None = None) -> list[str]:
    matrix = load_matrix(path, (), sets or [])
    assert matrix is not None
    return [matrix.label(v) for v in matrix.variants]


def test_the_variants_are_the_product_less_exclude_with_include(tmp_path: Path) -> None:
    path = write(tmp_path, {
        "service.args.max-num-seqs": [64, 128],
        "service": {"args": {"kv-cache-dtype": ["fp8", "auto"]}},  # nested, as --set makes it
        "exclude": [{"service.args.max-num-seqs": 128, "service.args.kv-cache-dtype": "auto"}],
        "include": [{"service.args.max-num-seqs": 256, "service.args.kv-cache-dtype": "fp8"},
                    {"service.args.kv-cache-dtype": "auto", "env.EXTRA": "1"}],
    })
    assert labels(path) == [
        "max-num-seqs=64 kv-cache-dtype=fp8 EXTRA=(plan)",
        "max-num-seqs=64 kv-cache-dtype=auto EXTRA=1",
        "max-num-seqs=128 kv-cache-dtype=fp8 EXTRA=(plan)",
        "max-num-seqs=256 kv-cache-dtype=fp8 EXTRA=(plan)",
    ]
    matrix = load_matrix(path)
    assert matrix is not None
    second = matrix.variants[1]
    assert second.plan.service is not None and second.plan.matrix is None
    assert second.plan.service.args == {"max-num-seqs": 64, "kv-cache-dtype": "auto"}
    assert second.plan.env == {"EXTRA": "1"}
    assert second.loaded.layers[-3:] == ['--set service.args.kv-cache-dtype="auto"',
                                         '--set env.EXTRA="1"', "--set matrix=null"]


def test_a_matrix_given_with_set_works_like_any_key(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert load_matrix(path) is None  # no matrix: a plain plan
    assert labels(path, ["matrix={service.args.max-num-seqs: [1, 2]}"]) == \
        ["max-num-seqs=1", "max-num-seqs=2"]
    assert labels(path, ["matrix.vars.version=[a, b]"]) == ["version=a", "version=b"]


@pytest.mark.parametrize(("matrix", "said", "at"), [
    ({"service.args.max-num-seqs": 4}, "matrix.service.args.max-num-seqs: an axis takes a "
     "non-empty list of values, got 4", "service.args.max-num-seqs: 4"),
    ({"service.args.max-num-seqs": []}, "an axis takes a non-empty list", "max-num-seqs: []"),
    ({"name": ["a", "b"]}, "name cannot vary in a matrix", "  - a"),
    ({"service.args.x": [1, 1]}, "the value 1 is given twice", "  - 1"),
    ({"service.args.max-num-seqs": [1], "exclude": [{"service.args.max-num-seq": 1}]},
     "service.args.max-num-seq is not an axis of the matrix (its axes: "
     "service.args.max-num-seqs)", "max-num-seq: 1"),
    ({"service.args.max-num-seqs": [1, 2], "exclude": [{"service.args.max-num-seqs": 3}]},
     "this exclude entry matches no variant", "  exclude:"),
    ({"service.args.max-num-seqs": [1], "objective": "p99 TTFT below 2s"},
     "cannot read 'p99 ttft below 2s'", "objective:"),
    ({"exclude": []}, "a matrix needs at least one axis", "exclude: []"),
])
def test_a_bad_matrix_is_a_located_error(tmp_path: Path, matrix: dict[str, Any], said: str,
                                         at: str) -> None:
    path = write(tmp_path, matrix)
    lines = path.read_text().splitlines()
    line = max(number for number, text in enumerate(lines, 1) if at in text)
    with pytest.raises(PlanError) as caught:
        load_matrix(path)
    text = str(caught.value)
    assert said in text, text
    assert f"plan.yaml:{line}" in text, text
    assert "Traceback" not in text


def test_an_invalid_variant_names_itself_before_anything_runs(tmp_path: Path) -> None:
    path = write(tmp_path, {"service.port": [8000, "abc"],
                            "service.args.max-num-seqs": [4, 8]})
    with pytest.raises(PlanError) as caught:
        load_matrix(path)
    text = str(caught.value)
    line = path.read_text().splitlines().index("  service.port:") + 1
    assert text.startswith(f"{path}:{line}: matrix variant 3 of 4 (port=abc max-num-seqs=4) "
                           'is not a valid plan (it sets service.port="abc"): service.port: '
                           "expected an integer"), text
    # a flag the compiler refuses (one that has its own field) is caught too
    path = write(tmp_path, {"service.args.port": [1, 2]})
    with pytest.raises(PlanError, match=r"matrix variant 1 of 2 \(port=1\)"):
        load_matrix(path)


def test_variants_sharing_an_install_and_a_server_run_together(tmp_path: Path) -> None:
    path = write(tmp_path, {"service.args.max-num-seqs": [1, 2],
                            "vars.version": ["1", "2"],
                            "bench.max_tokens": [8, 16]}, bench={"concurrency": [1]})
    matrix = load_matrix(path)
    assert matrix is not None
    written = [(v.values["service.args.max-num-seqs"], v.values["vars.version"],
                v.values["bench.max_tokens"]) for v in matrix.variants]
    assert written[:3] == [(1, "1", 8), (1, "1", 16), (1, "2", 8)]
    order = run_order(matrix.variants)
    ran = [(v.values["service.args.max-num-seqs"], v.values["vars.version"],
            v.values["bench.max_tokens"]) for v in order]
    assert ran == [(1, "1", 8), (1, "1", 16), (2, "1", 8), (2, "1", 16),
                   (1, "2", 8), (1, "2", 16), (2, "2", 8), (2, "2", 16)]
    steps = [transition(a.plan if a else None, b.plan) for a, b in zip([None, *order], order, strict=False)]
    assert steps == ["first", "reuse", "restart", "reuse", "install", "reuse", "restart", "reuse"]
    lines = changes(order[0].plan, order[4].plan)
    assert "~ program: /tmp/orch-mx/venv-1/bin/orch sim serve -> /tmp/orch-mx/venv-2/bin/orch " \
           "sim serve" in lines
    assert "~ python.venv: /tmp/orch-mx/venv-1 -> /tmp/orch-mx/venv-2" in lines
    assert changes(order[0].plan, order[1].plan) == ["~ bench.max_tokens: 8 -> 16"]


def test_limit_variants_by_number_and_by_value(tmp_path: Path) -> None:
    path = write(tmp_path, {"service.args.max-num-seqs": [64, 128],
                            "service.args.kv-cache-dtype": ["fp8", "auto"]})
    matrix = load_matrix(path)
    assert matrix is not None
    assert select(matrix, None) == {1, 2, 3, 4}
    assert select(matrix, "1,3") == {1, 3}
    assert select(matrix, "2-4") == {2, 3, 4}
    assert select(matrix, "kv-cache-dtype=auto") == {2, 4}
    assert select(matrix, "max-num-seqs=64,kv-cache-dtype=auto") == {2}
    assert select(matrix, "service.args.max-num-seqs=128") == {3, 4}
    for bad, said in [("7", "no variant 7 (it has 1 to 4)"), ("dtype=x", "not an axis"),
                      ("max-num-seqs=1", "no variant matches"), ("a-b", "cannot read")]:
        with pytest.raises(UsageError, match=re.escape(said)):
            select(matrix, bad)


def test_orch_plan_lists_only_the_variants_limit_keeps(tmp_path: Path) -> None:
    path = write(tmp_path, {"service.args.max-num-seqs": [64, 128],
                            "service.args.kv-cache-dtype": ["fp8", "auto"]})
    said = zygote.run(["plan", str(path), "--limit-variants", "kv-cache-dtype=auto"],
                      cwd=tmp_path, timeout=120, env={**os.environ, "COLUMNS": "200"})
    text = said.stdout + said.stderr
    assert "2 variants" in text, text
    rows = [line.split("│")[1].strip() for line in text.splitlines() if "max-num-seqs=" in line
            and line.startswith("│")]
    assert rows == ["2", "4"], text  # the numbers orch plan gives the whole matrix


def test_no_earlier_run_gives_no_estimate(tmp_path: Path) -> None:
    past = history(tmp_path / "runs", "mx")
    assert past.runs == 0 and past.bench is None


@pytest.mark.parametrize(("text", "keys", "where"), [
    ("p99 TTFT <= 2s at C >= 64", ["p99_ttft_ms"], ">= 64"),
    ("mean ITL < 50ms and p90 latency <= 30s", ["mean_itl_ms", "p90_e2el_ms"], None),
    ("median TPOT <= 40", ["median_tpot_ms"], None),
])
def test_the_objective_grammar(text: str, keys: list[str], where: str | None) -> None:
    objective = parse_objective(text)
    assert [c.key for c in objective.conditions] == keys
    assert (f"{objective.at_op} {objective.at_value}" if objective.at_op else None) == where
    first = objective.conditions[0]
    assert first.holds(first.limit_ms) == ("<" not in first.op or "=" in first.op)


def test_objective_limits_and_ranges() -> None:
    objective = parse_objective("p99 TTFT <= 2s at C >= 64")
    assert objective.covers(64) and not objective.covers(32)
    assert objective.conditions[0].holds(2000.0) and not objective.conditions[0].holds(2000.1)
    for bad in ("p99 foo <= 2s", "p99 TTFT <= 2s at D > 1", "fast"):
        with pytest.raises(ObjectiveError):
            parse_objective(bad)
