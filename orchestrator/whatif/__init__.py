"""The what-if model: what a deployment of a model on a GPU box would do, from its shape,
its GPUs and links and its vLLM flags (docs/simulator.md has every formula and constant).

    shapes.py       ModelShape, the known models; hf_config.py reads one from a config.json
    hardware.py     the known GPUs (by nvidia-smi's name) and links
    deployment.py   the flags it reads: TP, PP, DP, EP, max-num-seqs, KV dtype, memory
    costs.py        the formulas: an engine step by what it waits on, the memory check
    anchors.py      the measured deployments; engine_cost.py the engine a deployment makes
    batch.py        the batch benchmark replayed on counts; fit.py the calibration
    predict.py      a deployment's predicted curve; limiter.py what limits it
    (a plan's curve: orchestrator/plan/prediction.py, which reads the plan into a box)

Pure logic (the standard library only, below the simulator, which runs its engine from it);
the one file it reads is a config.json, at the edge (hf_config.read_config).
"""

from orchestrator.whatif.errors import WhatIfUnknown
from orchestrator.whatif.predict import PredictedLevel, Prediction

__all__ = ["PredictedLevel", "Prediction", "WhatIfUnknown"]
