"""orch bench against llama.cpp's real server, held against the server's own timings and
against `vllm bench serve` on the same server and prompts, in one run.

llama-server (built once from the llama-cpp-python source distribution, cached; see
tests/fixtures/llama.py) serves a tiny random-weight GGUF Llama made here, with 4 slots and
continuous batching. Both clients send the same prompts (a JSONL both read, no chat
template on the client side), --ignore-eos, at concurrency 1 and 4; so does a raw-socket
client that parses nothing, the floor of any client's TTFT: what it measures above the
server's prompt eval time is the server's own request handling. The server's figures
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
import queue
import re
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.agreement import orch_bench as shared_orch_bench  # noqa: E402
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
    return shared_orch_bench(url, c, count, tokens, out, "--dataset", str(prompts),
                             "--prompt-prefix", "shared")


_RELEASE = re.compile(r" I slot\s+release:")
_USAGE = re.compile(rb'"completion_tokens":(\d+)')


def raw_socket(url: str, model: str, prompts: Path, c: int, tokens: int) -> dict[str, Any]:
    """The floor for any client's TTFT: blocking sockets, `c` threads, the same request
    body as orch's (chat, streamed, usage asked for), a new connection per request, no
    parsing but a byte search for the first content; stamped at each recv."""
    host, port = url.removeprefix("http://").split(":")
    lines = prompts.read_text().splitlines()
    work: queue.Queue[str] = queue.Queue()
    for line in lines:
        work.put(json.loads(line)["prompt"])
    done: list[tuple[float, float, int]] = []  # (TTFT, TPOT, output tokens); a failure adds none

    def one(prompt: str) -> None:
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                           "max_tokens": tokens, "stream": True, "ignore_eos": True,
                           "stream_options": {"include_usage": True}}).encode()
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\nConnection: close\r\n"
                f"x-request-id: {uuid.uuid4()}\r\nContent-Length: {len(body)}\r\n\r\n")
        start = time.perf_counter()
        first = last = 0.0
        seen = b""
        with socket.create_connection((host, int(port)), timeout=120) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(head.encode() + body)
            while data := sock.recv(65536):
                now = time.perf_counter()
                seen += data
                if b'"content":"' in data:  # the role-only chunk says "content":null
                    first, last = first or now, now
        count = _USAGE.findall(seen)
        if not (first and count and seen.startswith(b"HTTP/1.1 200")):
            return
        n = int(count[-1])
        done.append(((first - start) * 1e3, (last - first) * 1e3 / max(n - 1, 1), n))

    def worker() -> None:
        while True:
            try:
                one(work.get_nowait())
            except queue.Empty:
                return

    began = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {"failed": len(lines) - len(done), "output_throughput": sum(n for *_, n in done) / wall,
            "mean_ttft_ms": fmean(t for t, _, _ in done), "mean_itl_ms": float("nan"),
            "mean_tpot_ms": fmean(t for _, t, _ in done)}


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

    @property
    def beyond(self) -> float:
        """TTFT beyond the server's prompt eval time: request handling and the client's
        own path (held against the same round's raw-socket run, the server's speed of the
        moment cancels out)."""
        return self.ttft - self.server.mean_prompt_ms


def measure(client: str, c: int, args: argparse.Namespace, server: LlamaServer,
            model: TinyModel, prompts: Path, work: Path, venv: Path) -> Run:
    mark = len(server.log.read_text())
    if client == "raw":
        result = raw_socket(server.url, model.name, prompts, c, args.tokens)
    elif client == "orch":
        result = orch_bench(server.url, prompts, c, args.prompts, args.tokens, work / "orch")
    else:
        result = vllm_bench_serve(venv, server, model, prompts, concurrency=c,
                                  count=args.prompts, tokens=args.tokens, out=work / "vllm")
    deadline = time.monotonic() + 5  # the server logs a request's release after its answer
    while len(_RELEASE.findall(server.log.read_text()[mark:])) < args.prompts \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return Run(result, server_levels(server.log.read_text()[mark:], args.prompts)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=32, help="requests per level")
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument("--rounds", type=int, default=3, help="runs per client and level")
    args = parser.parse_args()
    venv = cache_dir() / f"venv-vllm-{VLLM}"
    clients = ["raw", "orch", "vllm"] if (venv / "bin" / "vllm").exists() else ["raw", "orch"]
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
    names = {"raw": "raw socket", "orch": "orch bench", "vllm": "vllm bench serve"}
    print(f"llama-server from llama-cpp-python {LLAMA_CPP_PYTHON} sources, 4 slots; "
          f"{args.prompts} requests per level, {args.tokens} tokens each; median of "
          f"{args.rounds} alternating runs; load {os.getloadavg()[0]:.2f}\n")
    print("| C | client | failed | output tok/s | TTFT ms | ITL ms | TPOT ms | tok/s vs server "
          "| TPOT vs server | TTFT - server prompt eval | that, vs raw socket |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in LEVELS:
        for client in clients:
            group = runs[(client, c)]
            failed = sum(int(r.result.get("failed", 0)) for r in group)
            print(f"| {c} | {names[client]} | {failed} of {args.prompts * len(group)} | "
                  f"{median(r.throughput for r in group):,.1f} | "
                  f"{median(r.ttft for r in group):.2f} | {_itl(group)} | "
                  f"{median(r.tpot for r in group):.3f} | "
                  f"{median(r.throughput / r.server.throughput - 1 for r in group):+.2%} | "
                  f"{median(r.tpot / r.server.itl_ms - 1 for r in group):+.2%} | "
                  f"{median(r.beyond for r in group):+.2f} ms | "
                  f"{median(r.beyond - raw.beyond for r, raw in zip(group, runs[('raw', c)], strict=True)):+.2f} ms |")
    print("\nraw socket: blocking sockets, one thread per request in flight, the same request "
          "body, a byte search for the first content; the floor of a client's TTFT (it "
          "reports no ITL)")
    if len(clients) == 2:
        print(f"\n(no {venv}: `scripts/test --real` makes it; the vllm bench serve rows are "
              "left out)")


def _itl(group: list[Run]) -> str:
    value = median(r.itl for r in group)
    return "-" if value != value else f"{value:.3f}"  # NaN: the raw client has no ITL


if __name__ == "__main__":
    main()
