"""`--kv-cache-dtype` sizes the simulator's KV cache as it sizes vLLM's: the profile's memory
holds half as many tokens at `auto` (bf16) as at fp8, the start-up log and /metrics say so,
and the scheduler runs no more sequences than fit (the rest wait)."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from orchestrator.sim.calibration import batch_run
from orchestrator.sim.options import parse_serve_args
from orchestrator.sim.profiles import KIMI_NVFP4, PROFILES, kv_cache_tokens
from orchestrator.sim.testing import raw_batch, running_simulator


@pytest.mark.parametrize(("profile", "dtype", "tokens"), [
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", None, 449_536),  # calibrated with an fp8 cache
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "fp8", 449_536),
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "fp8_e4m3", 449_536),
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "fp8_e5m2", 449_536),
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "auto", 224_768),  # bf16: two bytes, half the tokens
    ("kimi-k2.5-nvfp4-8x-rtx-pro-6000", "bfloat16", 224_768),
    ("kimi-k2.5-nvfp4-marlin-fallback", "auto", 224_768),
    ("kimi-k2.5-int4-8x-rtx-pro-6000", "auto", 224_768),
    ("minimax-m2.5-4x-ep", None, 399_424),  # calibrated at auto
    ("minimax-m2.5-4x-ep", "auto", 399_424),
    ("minimax-m2.5-4x-ep", "fp8", 798_848),
    ("tiny-qwen2-vllm-cpu-2-cores", "fp8", 4_194_304),
    ("tiny-qwen2-vllm-cpu-2-cores", "nvfp4", 8_388_608),
])  # fmt: skip
def test_the_capacity_scales_with_the_bytes_per_element(profile: str, dtype: str | None,
                                                        tokens: int) -> None:
    assert kv_cache_tokens(PROFILES[profile], dtype) == tokens
    argv = ["m", "--profile", profile] + (["--kv-cache-dtype", dtype] if dtype else [])
    options = parse_serve_args(argv)
    assert options.kv_cache_tokens == tokens
    assert options.cache_dtype == (dtype or PROFILES[profile].kv_cache_dtype)
    assert options.ignored == []  # modelled, not "ignored"


def test_an_unknown_dtype_is_refused_as_vllm_refuses_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_serve_args(["m", "--kv-cache-dtype", "fp9"])
    assert exit_.value.code == 2
    assert "--kv-cache-dtype: invalid choice: 'fp9'" in capsys.readouterr().err


@pytest.mark.parametrize(("max_num_seqs", "fp8_over_auto"), [(128, 1.0), (256, 1.16)])
def test_the_halved_cache_bites_only_when_the_batch_outgrows_it(max_num_seqs: int,
                                                                 fp8_over_auto: float) -> None:
    """256 answers of 1,536 tokens: 401k tokens fit the fp8 cache (449,536), not the bf16 one
    (224,768), so at auto vLLM preempts and recomputes; 128 at a time fit both."""
    fp8, auto = (batch_run(KIMI_NVFP4, 256, max_tokens=1536, ignore_eos=True,
                           max_num_seqs=max_num_seqs, kv_cache_dtype=dtype)
                 for dtype in ("fp8", "auto"))  # fmt: skip
    assert fp8.throughput / auto.throughput == pytest.approx(fp8_over_auto, abs=0.02)
    assert fp8.generated_tokens == auto.generated_tokens == 256 * 1536


PROMPT = "word " * 8000  # 8,007 prompt tokens with the chat framing: 28 fit 224,768, 56 449,536


def _samples(page: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", page, re.M)]


@pytest.mark.parametrize(("dtype", "tokens", "blocks", "most_running"),
                         [("auto", 224_768, 14_048, 28), (None, 449_536, 28_096, 30)])
@pytest.mark.slow
def test_a_real_server_runs_what_its_cache_holds_and_queues_the_rest(
        dtype: str | None, tokens: int, blocks: int, most_running: int) -> None:
    with running_simulator(time_scale=0.03, startup_time_scale=0.0005, kv_cache_dtype=dtype,
                           max_num_batched_tokens=300_000) as sim:  # one prefill step
        log = sim.log()
        assert f"GPU KV cache size: {tokens:,} tokens" in log
        assert f"Maximum concurrency for 262,144 tokens per request: {tokens / 262_144:.2f}x" in log
        assert f"kv_cache_dtype={dtype or 'fp8'}," in log
        page = httpx.get(sim.url("/metrics")).text
        assert f'cache_dtype="{dtype or "fp8"}"' in page and f'num_gpu_blocks="{blocks}"' in page

        running: list[float] = []
        waiting: list[float] = []

        async def load() -> None:
            body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 64,
                    "ignore_eos": True}
            batch = asyncio.create_task(raw_batch(sim.base_url, body, 30))
            async with httpx.AsyncClient() as client:
                while not batch.done():
                    page = (await client.get(sim.url("/metrics"))).text
                    running.extend(_samples(page, "vllm:num_requests_running"))
                    if running[-1] == most_running:  # all that fit are in: the rest wait
                        waiting.extend(_samples(page, "vllm:num_requests_waiting"))
                    await asyncio.sleep(0.02)
            assert {r.status for r in batch.result()} == {200}

        started = time.monotonic()
        asyncio.run(load())
        assert max(running) == most_running
        assert max(waiting) == 30 - most_running
        assert time.monotonic() - started < 30
