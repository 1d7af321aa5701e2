"""The comments `orch init` writes into its plan and inventory: constant text by dotted path,
naming the files by NAME (checked: plain) and saying what each section is for."""

from __future__ import annotations

from orchestrator.init.commented_yaml import Notes
from orchestrator.init.spec import InitSpec


def plan_notes(spec: InitSpec) -> Notes:
    files = f"plans/{spec.name}.yaml -i inventory/{spec.name}.yaml"  # NAME is checked: plain
    engine = "the vLLM-compatible simulator" if spec.sim else "vLLM"
    notes = Notes()
    notes.above["name"] = [
        f"A starting plan written by `orch init`: {engine} serves one model on one host,",
        "two smoke requests check it, a concurrency sweep measures it. Edit freely:",
        f"  orch validate plans/{spec.name}.yaml",
        f"  orch plan {files}     # what apply would change (touches nothing)",
        f"  orch apply {files}    # install, launch, check, benchmark",
        "Every key, its type and default: docs/plan-reference.md. Layers, ${vars.NAME},",
        "secrets: docs/plans.md.",
        "",
    ]
    notes.inline["name"] = "names the run folders: runs/<name>/"
    notes.inline["hosts"] = "a host (or group) of the inventory"
    notes.above["vars"] = ["", "Values other strings use as ${vars.NAME}."]
    notes.inline["vars.vllm_version"] = "keep it quoted: a bare 0.20 would be the number 0.2"
    notes.above["python"] = ["", "The Python environment on the host: where it lives, how it is made."]
    notes.above["install"] = ["", "Exact pins only (name==version); installed versions are checked."]
    serve = "orch sim serve" if spec.sim else "vllm serve"
    notes.above["service"] = ["", f"The model server: `{serve} MODEL` and its flags (args: long names, no dashes)."]
    notes.inline["service.args.tensor-parallel-size"] = "the GPUs one copy of the model spans"
    notes.above["health"] = ["", "How long to wait for readiness (weights, torch.compile, CUDA graphs)."]
    notes.above["smoke"] = [
        "", "Requests that must succeed once the server is up. A reasoning model served with",
        "a reasoning parser (service.args.reasoning-parser) can also require `reasoning: present`."]
    notes.inline["smoke.1.max_tokens"] = "reasoning tokens count against the limit"
    notes.above["bench"] = ["", "The benchmark: C requests at once per level, to find where throughput stops growing."]
    (_sim_notes if spec.sim else _vllm_notes)(notes)
    return notes


def _sim_notes(notes: Notes) -> None:
    """What a simulator plan's sections mean."""
    notes.above["python"].append("Under your home: no root needed, and no other user's; "
                                  "shared by the simulator plans.")
    notes.inline["install.packages"] = "none: orch installs itself here (for `orch sim serve`)"
    notes.inline["service.engine"] = "`orch sim serve` speaks vLLM's protocol; engine: vllm for the real one"
    notes.inline["service.backend"] = "a supervised process: no systemd unit, no root"
    notes.above["service.sim"] = [
        "Throughput follows a measured profile (docs/simulator.md lists them); every duration",
        "is multiplied by time_scale, the start-up by startup_time_scale. Figures are reported",
        "in model time."]


def _vllm_notes(notes: Notes) -> None:
    """What a real vLLM plan's sections mean."""
    notes.inline["python.installer"] = "uv installs vLLM and torch much faster than pip"
    notes.inline["install.clean"] = "reinstall packages whose files were patched in place"
    notes.inline["install.torch_backend"] = "uv picks the PyTorch build for the host's CUDA driver"
    notes.above["env"] = [
        "", "The service's environment. A gated model (Llama, Gemma, ...) needs a Hugging Face",
        "token: uncomment the line below and export HF_TOKEN where you run orch (the value is",
        "read at run time, never stored or printed)."]
    notes.below["env"] = ["HF_TOKEN: ${env:HF_TOKEN}"]
    notes.inline["health.startup_timeout"] = "a large model takes minutes: weights, compile, graphs"
    notes.above["collect"] = ["", "Host files copied into the run folder."]


def inventory_notes(spec: InitSpec) -> Notes:
    notes = Notes()
    notes.above["hosts"] = [
        f"The hosts of plans/{spec.name}.yaml, written by `orch init`. Anything a host leaves",
        "unset comes from ~/.ssh/config, then from SSH's defaults. More hosts: add them here and",
        "name them (or a group of them, under groups:) in the plan's hosts:. inventory/example.yaml",
        "shows every key.",
        "",
    ]
    if spec.local:
        notes.inline[f"hosts.{spec.host}.connection"] = "this machine, without SSH"
        return notes
    notes.inline[f"hosts.{spec.host}.jump"] = "reached through this host (user@host[:port])"
    notes.inline[f"hosts.{spec.host}.vars"] = "host variables: a plan reads them as ${host.gpus}"
    notes.above["ssh"] = [""]
    notes.inline["ssh.known_hosts"] = "host keys are checked; `false` is the explicit opt-out"
    return notes
