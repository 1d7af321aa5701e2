"""What a run folder keeps of each host once its run ended: its steps and their outputs,
its facts, its frozen package set, its model's record, and meta.json's failures."""

from __future__ import annotations

from orchestrator.output import failure_reason
from orchestrator.runs.outcome import HostOutcome
from orchestrator.runs.run_records import HostFactsRecord
from orchestrator.runs.writer import RunFolder


def failures(outcomes: list[HostOutcome]) -> list[dict[str, str]]:
    """meta.json's `failures`: each failed host, the step or stage where, and why."""
    out = []
    for outcome in outcomes:
        why = failure_reason(outcome)
        if why is not None:
            step = outcome.failed_step
            out.append({"host": outcome.host, "step": step.step if step is not None else "",
                        "error": why})
    return out


def write_host_records(folder: RunFolder, outcomes: list[HostOutcome]) -> None:
    for outcome in outcomes:
        folder.write_steps(outcome.record())
        for step in outcome.steps:
            for name, text in step.outputs.items():
                folder.write_command_output(outcome.host, name, text)
        facts = outcome.facts
        if facts is None:
            continue
        folder.write_facts(outcome.host, HostFactsRecord(
            host=facts.host.to_json(), probe_seconds=facts.probe_seconds,
            record_files=facts.record_stats, transport=outcome.transport))
        if facts.venv is not None and facts.venv.exists:
            folder.write_freeze(outcome.host, facts.venv.freeze())
        model = facts.extra.get("model")
        if model is None:
            continue
        from orchestrator.facts.model import ModelFacts

        if isinstance(model, ModelFacts) and model.record() is not None:
            folder.write_model(outcome.host, model.record() or {})
