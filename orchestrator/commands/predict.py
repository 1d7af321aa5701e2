"""`orch predict PLAN`: what the plan's deployment would do, from the what-if model
(orchestrator/whatif/): the predicted curve over its bench.concurrency (tok/s, TTFT, TPOT,
running and waiting), the knee, the limiter and whether its weights fit, in model time (what
the real box would do, whatever the simulated plan's time scale). `--set` and `-f` as for
`orch validate`: `--set service.args.tensor-parallel-size=4` asks what TP4 would do.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
A simulated plan (engine: sim) is its profile's measured deployment with the plan's flags.
A vLLM plan's model comes from its `model:` section or service.model (a model the what-if
model knows by its repository, or a local checkpoint folder with a config.json; --config
gives one), its GPU from --gpu (default: NVIDIA RTX PRO 6000 Blackwell Server Edition).
Known GPUs: RTX PRO 6000 Blackwell Server Edition, H100 80GB HBM3, H200, B200, L40S,
A100-SXM4-80GB (names as nvidia-smi prints them).
Exit 0 when it fits, 1 when it does not (or the model or GPU is unknown)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("plan", type=Path, metavar="PLAN", help="plan file (YAML)")
    parser.add_argument("-f", "--overlay", action="append", type=Path, default=[], metavar="FILE",
                        help="overlay merged over the plan (repeatable)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                        help="set one value, e.g. --set service.args.tensor-parallel-size=4 "
                             "(repeatable)")  # fmt: skip
    parser.add_argument("--gpu", metavar="NAME", default=None,
                        help="the GPU of a vLLM plan, as nvidia-smi names it (default: RTX PRO "
                             "6000 Blackwell Server Edition)")  # fmt: skip
    parser.add_argument("--config", type=Path, metavar="PATH", default=None,
                        help="the model's config.json (or its folder), for a model the "
                             "what-if model does not know")  # fmt: skip
    parser.add_argument("--json", action="store_true",
                        help="print the prediction as JSON, each level with vllm bench serve's "
                             "keys (max_concurrency, output_throughput, mean_ttft_ms, ...)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from orchestrator.plan.loader import load_plan
    from orchestrator.plan.prediction import predict_plan

    plan = load_plan(args.plan, args.overlay, args.sets).plan
    prediction = predict_plan(plan, gpu_name=args.gpu, config=args.config)
    if args.json:
        payload = {"plan": plan.name, "model": prediction.model, "gpu": prediction.gpu,
                   "deployment": prediction.deployment, "fits": prediction.fits,
                   "why": prediction.why, "memory": prediction.memory,
                   "limiter": prediction.limiter, "knee": prediction.knee,
                   "peak_output_throughput": prediction.peak_output_throughput,
                   "anchored": prediction.anchored, "kv_cache_tokens": prediction.kv_cache_tokens,
                   "time": "model", "levels": [lv.as_result() for lv in prediction.levels]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(_lines(plan.name, prediction)) + "\n")
    return 0 if prediction.fits else 1


def _lines(name: str, p: object) -> list[str]:
    from orchestrator.whatif import Prediction

    assert isinstance(p, Prediction)
    basis = "scaled from its measured deployment" if p.anchored else "from the formulas alone"
    lines = [f"{name}: {p.model} on {p.gpu}, {p.deployment} ({basis}; model time)",
             f"memory: {p.memory}"]
    if not p.fits:
        return [*lines, f"does not fit: {p.why}"]
    lines += [f"KV cache: {p.kv_cache_tokens:,} tokens per replica", "",
              f"{'C':>6} {'tok/s':>9} {'TTFT ms':>9} {'TPOT ms':>8} {'running':>8} {'waiting':>8}"]
    for lv in p.levels:
        lines.append(f"{lv.max_concurrency:>6} {lv.output_throughput:>9,.1f} {lv.mean_ttft_ms:>9,.0f} "
                     f"{lv.mean_tpot_ms:>8.1f} {lv.running:>8} {lv.waiting:>8}")
    lines += ["", f"peak {p.peak_output_throughput:,.0f} tok/s; knee at C={p.knee}",
              f"limiter: {p.limiter}: {p.why}"]
    return lines
