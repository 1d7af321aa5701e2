"""The what-if model's calibration table (docs/simulator.md): its constants fitted on the three
measured deployments, their targets against the formulas' predictions (no anchor), and each
deployment predicted by the constants fitted on the other two (leave-one-out).

    .venv/bin/python benchmarks/whatif_calibration.py
"""

from __future__ import annotations

from orchestrator.whatif import fit
from orchestrator.whatif.anchors import MEASURED
from orchestrator.whatif.costs import Constants


def _row(label: str, name: str, consts: Constants) -> list[str]:
    measured = MEASURED[name]
    got = fit.predicted(measured, consts)
    cells = [f"{c}: {t:,.0f} -> {got[c]:,.0f} ({100 * (got[c] / t - 1):+.1f}%)"
             for c, t in measured.targets.items()]
    return [f"| {label:<13} | {name:<10} | " + " | ".join(cells) + " |"]


def _constants(consts: Constants) -> str:
    weights = ", ".join(f"W_{q}={v:.4g}" for q, v in consts.weight.items())
    return f"LAYER_S={consts.layer_s:.4g} s, SEQ_S={consts.seq_s:.4g} s, HOP_S={consts.hop_s:.4g} s, {weights}"


def main() -> None:
    every = fit.calibrate(MEASURED)
    print(f"all three: {_constants(every)}")
    lines = ["| fitted on     | deployment | C: target -> predicted (error) |", "|---|---|---|"]
    for name in MEASURED:
        lines += _row("all three", name, every)
    for name in MEASURED:
        others = fit.calibrate({k: v for k, v in MEASURED.items() if k != name})
        print(f"without {name}: {_constants(others)}")
        lines += _row("the other two", name, others)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
