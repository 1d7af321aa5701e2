"""The real vLLM 0.17.1 with torch (heavy part, opt-in: `scripts/test --real`): the shipped
plans' command lines checked by vLLM's own parser and validation, orch's table of its flags
regenerated from it and compared, and vLLM's real start-up on this machine (no GPU) launched
by orch, diagnosed, and not relaunched. The venv (about 11 GB) is made once and kept in the
cache (tests/fixtures/realpkgs.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.orchcli import last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.realpkgs import FLASHINFER, LIGHT_PINS, OLD_CUBIN, UV, full_venv, wheel, wheels_dir
from fixtures.sshd import SshServer
from fixtures.vllm_flags import TABLES, regenerated, vllm_flags

from orchestrator.engines.vllm.phases import PhaseTracker
from orchestrator.plan.loader import load_plan
from orchestrator.service.diagnosis import diagnose
from orchestrator.service.launch import render_launch

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
SHIPPED = ["kimi-nvfp4", "kimi-int4", "minimax-m2.5"]
pytestmark = [pytest.mark.slow, pytest.mark.real_heavy]


@pytest.fixture(scope="module")
def venv() -> Path:
    return full_venv()


@pytest.fixture(scope="module")
def tiny_model(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer Llama config with a locally trained tokenizer: vLLM gets past the hub."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }))
    script = (
        "import sys\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers, trainers\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "tok = Tokenizer(models.BPE(unk_token='<unk>'))\n"
        "tok.pre_tokenizer = pre_tokenizers.ByteLevel()\n"
        "tok.train_from_iterator(['the sky is blue because of rayleigh scattering'] * 50,\n"
        "    trainers.BpeTrainer(vocab_size=1000, special_tokens=['<unk>', '<s>', '</s>']))\n"
        "t = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token='<s>', eos_token='</s>',\n"
        "    unk_token='<unk>')\n"
        "t.chat_template = \"{% for m in messages %}{{ m['content'] }}{% endfor %}\"\n"
        "t.save_pretrained(sys.argv[1])\n"
    )
    subprocess.run([str(venv / "bin" / "python"), "-c", script, str(folder)], check=True,
                   capture_output=True)
    return folder


def _vllm_checks(venv: Path, argvs: list[list[str]]) -> list[dict[str, object]]:
    result = subprocess.run(
        [str(venv / "bin" / "python"), str(HERE / "vllm_check_args.py")],
        input=json.dumps(argvs), capture_output=True, text=True, timeout=600, check=True,
    )
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_the_shipped_flag_table_of_vllm_0_17_1_is_the_real_parsers(
        venv: Path, tmp_path: Path) -> None:
    made = regenerated(venv, tmp_path)
    assert made.name == "flags-0.17.1.txt"
    assert made.read_text() == (TABLES / made.name).read_text(), (
        f"vLLM 0.17.1's parser differs from the shipped table: python scripts/vllm_flags.py {venv}")
    # --check says what differs: a flag the table lacks, a flag the package lacks.
    lines = made.read_text().splitlines()
    lines.remove("--swap-space")
    made.write_text("\n".join([*lines, "--not-a-flag", ""]))
    checked = vllm_flags(venv, "--check", "--tables", tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[1:] == [
        "  + --swap-space  (the package has it, the table does not)",
        "  - --not-a-flag  (the table has it, the package does not)",
    ]


def test_the_shipped_plans_pass_vllms_own_parser_and_checks(venv: Path) -> None:
    argvs = []
    for name in SHIPPED:
        plan = load_plan(ROOT / "plans" / f"{name}.yaml").plan
        spec = render_launch(plan, venv_bin="/opt/venvs/vllm/bin")
        assert spec.argv[:2] == ["/opt/venvs/vllm/bin/vllm", "serve"]
        argvs.append(spec.argv[1:])
    # Controls: the same checks refuse what vLLM refuses.
    bad = load_plan(ROOT / "plans" / "kimi-nvfp4.yaml",
                    sets=["service.args.reasoning-parser=kimi"]).plan
    argvs.append(render_launch(bad, venv_bin="/v/bin").argv[1:])
    argvs.append(["serve", "m", "--tensor-parallel-size", "eight"])
    results = _vllm_checks(venv, argvs)
    for name, result in zip(SHIPPED, results, strict=False):
        assert result["ok"], (name, result)
    assert results[0]["tensor_parallel_size"] == 8
    assert results[-2] == {"ok": False, "stage": "validate",
                           "error": "KeyError: \"reasoning parser 'kimi' is not registered\""}
    assert results[-1]["ok"] is False and "invalid int value: 'eight'" in str(results[-1]["error"])


def _cpu_serve(venv: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`vllm serve` as far as a machine without GPU lets it go (vLLM's CPU platform)."""
    launcher = (
        "import sys\n"
        "from vllm import platforms\n"
        "from vllm.platforms.cpu import CpuPlatform\n"
        "platforms.current_platform = CpuPlatform()\n"
        "if __name__ == '__main__':\n"
        "    from vllm.entrypoints.cli.main import main\n"
        "    sys.argv = ['vllm', 'serve', *sys.argv[1:]]\n"
        "    main()\n"
    )
    result = subprocess.run([str(venv / "bin" / "python"), "-c", launcher, *args],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, **(env or {})})
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_real_start_up_logs_are_read_and_diagnosed(venv: Path, tiny_model: Path) -> None:
    log = _cpu_serve(venv, str(tiny_model), "--port", str(free_port()), "--attention-backend",
                     "NOPE", env={"HF_HUB_OFFLINE": "1"})
    tracker = PhaseTracker(origin=0.0)
    tracker.feed(log.splitlines(), 1.0)
    assert tracker.facts["vllm_version"] == "0.17.1"  # from vLLM's logo banner
    assert tracker.facts["model"] == str(tiny_model)
    (diagnosis,) = [d for d in diagnose(log, "vllm") if d.level == "error"]
    assert diagnosis.key == "unknown-attention-backend"
    assert "TRITON_MLA" in diagnosis.details["choices"]

    plain = _cpu_serve(venv, "moonshotai/Kimi-K2.5", "--port", str(free_port()),
                       env={"VLLM_DISABLE_LOG_LOGO": "1", "HF_HUB_ETAG_TIMEOUT": "1"})
    assert "vLLM server version 0.17.1, serving model moonshotai/Kimi-K2.5" in plain
    (diagnosis,) = [d for d in diagnose(plain, "vllm") if d.level == "error"]
    assert diagnosis.key == "hub-unreachable"
    assert diagnosis.details["model"] == "moonshotai/Kimi-K2.5"


def test_the_real_flashinfer_mismatch_text(venv: Path) -> None:
    install = [str(UV), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
               "--no-deps"]
    subprocess.run([*install, str(wheel("flashinfer-cubin", OLD_CUBIN))], check=True)
    try:
        crashed = subprocess.run([str(venv / "bin" / "python"), "-c", "import flashinfer"],
                                 capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run([*install, str(wheel("flashinfer-cubin", FLASHINFER))], check=True)
    assert crashed.returncode != 0
    (diagnosis,) = diagnose(crashed.stderr, "vllm")
    assert diagnosis.key == "flashinfer-cubin-mismatch"
    assert diagnosis.fix.startswith(f"pin flashinfer-cubin=={FLASHINFER} in install.packages")


def test_orch_launches_the_real_vllm_and_diagnoses_its_death_without_relaunching(
    venv: Path, tiny_model: Path, tmp_path: Path, sshd: SshServer
) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "real-vllm",
        "hosts": "all",
        "python": {"venv": str(venv), "interpreter": sys.executable, "installer": "uv"},
        "install": {"packages": LIGHT_PINS, "find_links": [str(wheels_dir())], "no_index": True},
        "env": {"HF_HUB_OFFLINE": "1"},
        "service": {
            "engine": "vllm", "model": str(tiny_model), "served_model_name": "tiny",
            "backend": "process", "host": "127.0.0.1", "port": free_port(),
            "args": {"reasoning-parser": "kimi_k2", "attention-backend": "TRITON_MLA"},
            "restart": {"max_restarts": 2},
        },
        "health": {"startup_timeout": "5m", "poll_interval": "1s"},
    }))
    result = orch("apply", plan, "-i", inventory, cwd=tmp_path, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "the server died during start-up" in output
    assert "vLLM found no GPU on the host (libcuda.so.1 cannot be loaded" in output
    assert "relaunch" not in output  # a diagnosed death spends no restart
    run = last_run(tmp_path)
    diagnosis = json.loads((run / "hosts" / "h1" / "diagnosis.json").read_text())
    assert [d["key"] for d in diagnosis if d["level"] == "error"] == ["no-gpu"]
    assert "Failed to infer device type" in (run / "hosts" / "h1" / "service.log").read_text()

    # A wrong parser name is caught before the launch, from the host's own vLLM files.
    data = yaml.safe_load(plan.read_text())
    data["service"]["args"]["reasoning-parser"] = "kimi"
    plan.write_text(yaml.safe_dump(data))
    check = orch("plan", plan, "-i", inventory, cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    said = " ".join(check.stdout.split())
    assert "'kimi' is not a name the host's vLLM 0.17.1 knows" in said
    assert "did you mean 'kimi_k2'?" in said
