"""Each value of the tune space tried as a plan before anything runs (reads the plan files):
every value of a list, and both ends of a range, set alone on the plan. A value that makes
no valid plan (`service.port: [8000, abc]`) is one located error at its tune axis, as an
invalid matrix variant is; `orch validate` and `orch tune` both check. A value only the
server can refuse (`max-num-seqs: 0`) fails its trial when it starts, as a result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import PlanError
from orchestrator.plan.loader import LoadedPlan, load_plan
from orchestrator.plan.models.tune import Choice, Param
from orchestrator.tune.space import tune_sets


def _values(param: Param) -> list[Any]:
    if isinstance(param, Choice):
        return list(param.values)
    return [param.low, param.high]


def check_space(path: Path | str, overlays: Sequence[Path | str], sets: Sequence[str],
                loaded: LoadedPlan) -> int:
    """How many values were checked; a PlanError for the first that makes no valid plan."""
    from orchestrator.apply.compile import check as compile_check

    tune = loaded.plan.tune
    if tune is None:
        return 0
    count = 0
    for axis, param in tune.params().items():
        for value in _values(param):
            count += 1
            try:
                compile_check(load_plan(path, overlays, [*sets, *tune_sets({axis: value})]))
            except PlanError as error:
                origin = loaded.field_origins.get(f"tune.{axis}") or \
                    loaded.field_origins.get("tune")
                raise PlanError(
                    f"tune: {axis}={json.dumps(value)} makes no valid plan: {error.message}",
                    file=origin.layer if origin else None, line=origin.line if origin else None,
                    field=error.field, expected=error.expected, hint=error.hint) from None
    return count
