"""The habits of Ansible's and vLLM's users, through the real CLI: their options are usage
errors that say what orch uses instead, `--debug` after the command, `orch logs -f` (an
overlay, not follow), `--limit` with groups and patterns, `orch validate` of a matrix, and
`orch bench` with vllm bench serve's spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import orch

from orchestrator.cli_hints import HINTS, LOGS_FOLLOW
from orchestrator.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parents[2]
SIM_PLAN = ROOT / "plans" / "sim" / "kimi-nvfp4.yaml"
PLAN = str(SIM_PLAN)

# (argv, the option as said, what orch uses instead): each entry of cli_hints.HINTS at least once
HABITS = [
    (["plan", PLAN, "-e", "service.port=8001"], "-e", "--set KEY=VALUE"),
    (["apply", PLAN, "-eservice.port=8001"], "-e", "-f FILE for a file of values"),
    (["validate", PLAN, "--extra-vars", "@vars.yml"], "--extra-vars", "--set KEY=VALUE"),
    (["plan", PLAN, "--extra-vars=x=1"], "--extra-vars", "--set KEY=VALUE"),
    (["apply", PLAN, "-l", "gpu1"], "-l", "--limit"),
    (["status", PLAN, "-lgpu1"], "-l", "--limit"),
    (["plan", PLAN, "-v"], "-v", "--debug"),
    (["apply", PLAN, "-vvv"], "-vvv", "--debug"),
    (["bench", "--url", "http://127.0.0.1:9", "--verbose"], "--verbose", "--debug"),
    (["-vv", "plan", PLAN], "-vv", "--debug"),
    (["apply", PLAN, "--check"], "--check", "orch plan PLAN"),
    (["apply", PLAN, "--diff"], "--diff", "orch plan PLAN shows the differences"),
]


@pytest.mark.parametrize(("argv", "said", "instead"), HABITS,
                         ids=[f"{said}-{index}" for index, (_, said, _) in enumerate(HABITS)])
def test_a_habit_is_a_usage_error_saying_what_orch_uses(tmp_path: Path, argv: list[str],
                                                        said: str, instead: str) -> None:
    result = orch(*argv, cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE, result.stderr
    command = next(a for a in argv if not a.startswith("-"))
    assert result.stderr.startswith(f"usage: orch {command} "), result.stderr
    assert f"orch {command}: error: {said} is not an orch option; " in result.stderr
    assert instead in result.stderr and "Traceback" not in result.stderr


def test_every_hint_is_tested() -> None:
    tested = {"-v" if said.startswith("-v") else said for _, said, _ in HABITS}
    assert tested == set(HINTS)


def test_sim_serve_keeps_vllms_own_flags(tmp_path: Path) -> None:
    """`orch sim serve` takes vLLM's flags verbatim: -v there is not orch's to refuse."""
    result = orch("sim", "serve", "--help", "-v", cwd=tmp_path, timeout=60)
    assert "is not an orch option" not in result.stderr


@pytest.mark.slow
def test_debug_after_the_command_as_before_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nhosts: localhost\nfiles: [{path: relative, content: x}]\n")
    for argv in (["--debug", "validate", bad], ["validate", bad, "--debug"]):
        result = orch(*argv, cwd=tmp_path)
        assert "Traceback" in result.stderr and "PlanError" in result.stderr, argv
    plain = orch("validate", bad, cwd=tmp_path)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert orch("validate", SIM_PLAN, "--debug", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_logs_f_is_an_overlay_and_says_follow_is_follow(tmp_path: Path) -> None:
    for extra in (["-f"], ["-f", "--lines", "5"]):
        result = orch("logs", SIM_PLAN, *extra, cwd=tmp_path)
        assert result.returncode == ExitCode.USAGE, result.stderr
        assert f"orch logs: error: {LOGS_FOLLOW}\n" in result.stderr
    missing = orch("logs", SIM_PLAN, "-f", "follow", cwd=tmp_path)
    assert missing.returncode == ExitCode.USAGE
    assert f"{LOGS_FOLLOW} (there is no file 'follow')" in missing.stderr
    overlay = tmp_path / "port.yaml"
    overlay.write_text("service: {port: 18999}\n")
    given = orch("logs", SIM_PLAN, "-f", overlay, "-n", "1", cwd=tmp_path)
    assert LOGS_FOLLOW not in given.stderr and given.returncode != ExitCode.USAGE
    # -f on other commands is the overlay as ever: no follow hint there
    assert LOGS_FOLLOW not in orch("validate", SIM_PLAN, "-f", "nope.yaml", cwd=tmp_path).stderr


INVENTORY = {"hosts": {name: {"connection": "local"} for name in ("gpu1", "gpu2", "gpu3", "cpu1")},
             "groups": {"gpus": ["gpu1", "gpu2", "gpu3"]}}


@pytest.mark.parametrize(("limit", "hosts"), [
    ("gpus", "gpu1, gpu2, gpu3"),
    ("gpu*", "gpu1, gpu2, gpu3"),
    ("gpu[12]", "gpu1, gpu2"),
    ("gpus:!gpu3", "gpu1, gpu2"),
    ("!gpus", "cpu1"),
    ("cpu1,gpu2", "gpu2, cpu1"),
    ("g*:!gpu1", "gpu2, gpu3"),  # a pattern matches group names too
])
@pytest.mark.slow
def test_limit_takes_groups_and_patterns(tmp_path: Path, limit: str, hosts: str) -> None:
    plan, inventory = _limited(tmp_path)
    result = orch("plan", plan, "-i", inventory, "--limit", limit, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"plan (check mode) limited on {hosts}\n"), result.stdout


@pytest.mark.slow
def test_a_limit_that_matches_nothing_names_the_hosts_and_groups(tmp_path: Path) -> None:
    plan, inventory = _limited(tmp_path)
    result = orch("plan", plan, "-i", inventory, "--limit", "tpu*", cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: --limit names tpu*, which matches no host or group of the inventory " \
           f"({inventory})" in result.stderr
    assert "known hosts: gpu1, gpu2, gpu3, cpu1; groups: gpus" in result.stderr
    gone = orch("plan", plan, "-i", inventory, "--limit", "gpus", "--limit", "!gpu*",
                cwd=tmp_path)
    assert gone.returncode == 1
    assert "--limit gpus,!gpu* leaves none of the plan's hosts (gpu1, gpu2, gpu3, cpu1)" \
        in gone.stderr


def _limited(tmp_path: Path) -> tuple[Path, Path]:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(yaml.safe_dump(INVENTORY, sort_keys=False))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "limited", "hosts": ["gpus", "cpu1"], "files": [
        {"path": f"{tmp_path}/out/${{host.name}}.conf", "content": "x\n"}]}))
    return plan, inventory


MATRIX_BASE = {
    "name": "mx",
    "python": {"venv": "/tmp/orch-mx/venv", "interpreter": "python3", "installer": "pip"},
    "service": {"engine": "sim", "model": "m", "backend": "process", "port": 8123},
}


@pytest.mark.slow
def test_validate_checks_the_matrix_as_plan_does(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({**MATRIX_BASE, "matrix": {
        "service.args.max-num-seqs": [4, 8], "service.args.kv-cache-dtype": ["fp8", "auto"],
        "exclude": [{"service.args.max-num-seqs": 8, "service.args.kv-cache-dtype": "auto"}]}},
        sort_keys=False))
    ok = orch("validate", good, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == f"ok   {good} (mx; 1 layer; matrix: 3 variants checked)\n"

    bad_value = tmp_path / "value.yaml"
    bad_value.write_text(yaml.safe_dump({**MATRIX_BASE, "matrix": {
        "service.args.max-num-seqs": [4], "service.port": [8000, "abc"]}}, sort_keys=False))
    line = bad_value.read_text().splitlines().index("  service.port:") + 1
    no_match = tmp_path / "exclude.yaml"
    no_match.write_text(yaml.safe_dump({**MATRIX_BASE, "matrix": {
        "service.args.max-num-seqs": [4, 8], "exclude": [{"service.args.max-num-seqs": 16}]}},
        sort_keys=False))
    exclude_line = no_match.read_text().splitlines().index("  exclude:") + 1
    result = orch("validate", good, bad_value, no_match, cwd=tmp_path)
    assert result.returncode == 1
    assert f"FAIL {bad_value}\n{bad_value.name}:{line}: matrix variant 2 of 2 (port=abc) is not a " \
           'valid plan (it sets service.port="abc"): service.port: expected an integer' \
           in result.stderr
    assert f"FAIL {no_match}\n{no_match.name}:{exclude_line}: this exclude entry matches no " \
           "variant" in result.stderr
    assert result.stdout.startswith(f"ok   {good} ") and "Traceback" not in result.stderr


def test_bench_takes_vllm_bench_serves_spellings(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with hostile_server(Misbehaviour(usage={"prompt_tokens": 8, "completion_tokens": 5})) as url:
        result = orch("bench", "--url", url, "--endpoint", "/v1/chat/completions",
                      "--dataset-name", "random", "--random-input-len", "8", "--save-result",
                      "--max-concurrency", "1", "--num-prompts", "2", "--num-warmups", "0",
                      "--no-metrics", "--result-dir", out, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    level = json.loads((out / "level-c1.json").read_text())
    assert level["endpoint_type"] == "openai-chat" and level["input_len"] == 8
    assert level["completed"] == 2


def test_bench_dataset_name_random_and_the_completions_path(tmp_path: Path) -> None:
    from orchestrator.cli import build_parser
    from orchestrator.commands.bench import bench_config

    parser = build_parser("bench")
    args = parser.parse_args(["bench", "--url", "http://x", "--endpoint", "/v1/completions",
                              "--dataset-name", "random"])
    assert bench_config(args) == {"endpoint": "completions", "input_len": 1024}  # vLLM's default
    help_text = orch("bench", "--help", cwd=tmp_path).stdout
    assert "orch always saves its results" in " ".join(help_text.split())


@pytest.mark.parametrize(("argv", "said"), [
    (["--dataset-name", "sharegpt"], "orch bench supports only --dataset-name random "
     "(synthetic prompts of --input-len tokens), not 'sharegpt'; for prompts of your own give "
     "--dataset FILE.jsonl"),
    (["--dataset-name", "random", "--prompt", "hi"], "--dataset-name random makes synthetic "
     "prompts: give it without --dataset and --prompt"),
    (["--endpoint", "/v1/embeddings"], "invalid choice: '/v1/embeddings'"),
])
def test_bench_refuses_what_it_cannot_mean(tmp_path: Path, argv: list[str], said: str) -> None:
    result = orch("bench", "--url", "http://127.0.0.1:9", *argv, cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert said in " ".join(result.stderr.split()), result.stderr
