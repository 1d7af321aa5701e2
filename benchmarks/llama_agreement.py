"""orch bench against llama.cpp's real server, held against the server's own timings and
against `vllm bench serve` on the same server and prompts, in one run.

llama-server (built once from the llama-cpp-python source distribution, cached; see
tests/fixtures/llama.py) serves a tiny random-weight GGUF Llama made here, with 4 slots and
continuous batching. Both clients send the same prompts (a JSONL both read, no chat
template on the client side), --ignore-eos, at concurrency 1 and 4. The server's figures
come from its log: output tokens, throughput over its busy window (first slot launch to
last release), prompt eval time per request, eval time per token gap (which TPOT, the
per-token figure of both clients, measures from outside; ITL is per chunk, and a chunk can
carry no text, such as a special token's).

`vllm bench serve` runs from the whole vLLM 0.17.1 venv of the heavy tests
(~/.cache/orch/real/venv-vllm-0.17.1, made by `scripts/test --real`); without it those
rows are left out.

The machine's noise moves the server's own speed by up to 40% between runs, so each client
is held against the server's view of the very same requests (the "vs server" columns), and
the clients' runs alternate, level by level, median of --rounds.

    .venv/bin/python benchmarks/llama_agreement.py [--prompts 32] [--tokens 128] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.llama import (  # noqa: E402
    LLAMA_CPP_PYTHON,
    LlamaServer,
    ServerLevel,
    TinyModel,
    make_tiny_model,
    running_llama_server,
    server_levels,
    vllm_bench_serve,
    write_prompts,
)
from fixtures.realpkgs import VLLM, cache_dir  # noqa: E402

LEVELS = (1, 4)


def orch_bench(url: str, prompts: Path, c: int, count: int, tokens: int, out: Path) -> dict[str, Any]:
    subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "bench", "--url", url,
         "--concurrency", str(c), "--num-prompts", str(count),
         "--num-warmups", "0", "--max-tokens", str(tokens), "--ignore-eos",
         "--dataset", str(prompts), "--prompt-prefix", "shared", "--result-dir", str(out)],
        check=True, capture_output=True, text=True, cwd=ROOT, timeout=900,
    )
    result: dict[str, Any] = json.loads((out / f"level-c{c}.json").read_text())
    return result


@dataclass
class Run:
    """One client's level and the server's own view of it (the same requests)."""

    result: dict[str, Any]
    server: ServerLevel

    @property
    def throughput(self) -> float:
        return float(self.result["output_throughput"])

    @property
    def ttft(self) -> float:
        return float(self.result["mean_ttft_ms"])

    @property
    def itl(self) -> float:
        return float(self.result["mean_itl_ms"])

    @property
    def tpot(self) -> float:
        return float(self.result["mean_tpot_ms"])


def measure(client: str, c: int, args: argparse.Namespace, server: LlamaServer,
            model: TinyModel, prompts: Path, work: Path, venv: Path) -> Run:
    mark = len(server.log.read_text())
    if client == "orch":
        result = orch_bench(server.url, prompts, c, args.prompts, args.tokens, work / "orch")
    else:
        result = vllm_bench_serve(venv, server, model, prompts, concurrency=c,
                                  count=args.prompts, tokens=args.tokens, out=work / "vllm")
    return Run(result, server_levels(server.log.read_text()[mark:], args.prompts)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=32, help="requests per level")
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument("--rounds", type=int, default=3, help="runs per client and level")
    args = parser.parse_args()
    venv = cache_dir() / f"venv-vllm-{VLLM}"
    clients = ["orch", "vllm"] if (venv / "bin" / "vllm").exists() else ["orch"]
    runs: dict[tuple[str, int], list[Run]] = {}
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        model = make_tiny_model(work / "model")
        prompts = write_prompts(work / "prompts.jsonl", args.prompts)
        with running_llama_server(model, work / "server.log") as server:
            # a first pass warms the server up (its first requests are slower): not shown
            orch_bench(server.url, prompts, max(LEVELS), args.prompts, args.tokens, work / "warm")
            for c in LEVELS:  # alternating, so both clients meet the same machine
                for _ in range(args.rounds):
                    for client in clients:
                        runs.setdefault((client, c), []).append(
                            measure(client, c, args, server, model, prompts, work, venv))
    names = {"orch": "orch bench", "vllm": "vllm bench serve"}
    print(f"llama-server from llama-cpp-python {LLAMA_CPP_PYTHON} sources, 4 slots; "
          f"{args.prompts} requests per level, {args.tokens} tokens each; median of "
          f"{args.rounds} alternating runs; load {os.getloadavg()[0]:.2f}\n")
    print("| C | client | failed | output tok/s | TTFT ms | ITL ms | TPOT ms | tok/s vs server "
          "| TPOT vs server | TTFT - server prompt eval |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in LEVELS:
        for client in clients:
            group = runs[(client, c)]
            failed = sum(int(r.result.get("failed", 0)) for r in group)
            print(f"| {c} | {names[client]} | {failed} of {args.prompts * len(group)} | "
                  f"{median(r.throughput for r in group):,.1f} | "
                  f"{median(r.ttft for r in group):.2f} | {median(r.itl for r in group):.3f} | "
                  f"{median(r.tpot for r in group):.3f} | "
                  f"{median(r.throughput / r.server.throughput - 1 for r in group):+.2%} | "
                  f"{median(r.tpot / r.server.itl_ms - 1 for r in group):+.2%} | "
                  f"{median(r.ttft - r.server.mean_prompt_ms for r in group):+.2f} ms |")
    if len(clients) == 1:
        print(f"\n(no {venv}: `scripts/test --real` makes it; the vllm bench serve rows are "
              "left out)")


if __name__ == "__main__":
    main()
