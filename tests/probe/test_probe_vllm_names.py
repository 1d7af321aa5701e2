"""The names an installed vLLM accepts, read from its files by the fact program (no import).

Both layouts vLLM has used: registration dicts in `__init__.py` (0.16 and later, checked
against the real 0.17.1 wheel in tests/real) and decorators in each parser module with the
attention backends in `platforms/interface.py` (0.11); here as small trees of files."""

from __future__ import annotations

from pathlib import Path

from orchestrator.remote.facts import vllm_facts


def _venv(tmp_path: Path, version: str, files: dict[str, str]) -> Path:
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    (site / f"vllm-{version}.dist-info").mkdir(parents=True)
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(f"Name: vllm\nVersion: {version}\n")
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
        "version": "0.17.1",
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
    assert vllm_facts(str(venv)) == {"version": "9.0.0", "reasoning_parsers": None,
                                     "tool_parsers": None, "attention_backends": None}
    assert vllm_facts(str(tmp_path / "nowhere")) is None
