"""The flag tables orch ships per vLLM release, and the one rule of which plan arguments name
a flag (used at plan time against a table, and on the host against the installed vLLM)."""

from __future__ import annotations

from orchestrator.engines.vllm.flag_table import shipped_flags, shipped_versions, unknown_flags

KNOWN = frozenset({"--max-num-seqs", "--compilation-config", "--port", "-tp", "-n",
                   "--tensor-parallel-size"})


def test_the_shipped_tables_and_the_release_a_build_version_names() -> None:
    assert shipped_versions() == ["0.17.1", "0.32.0"]
    old, new = shipped_flags("0.17.1"), shipped_flags("0.32.0")
    assert old is not None and new is not None
    assert {"--tensor-parallel-size", "--swap-space", "-tp"} <= old
    assert "--swap-space" not in new and "--numa-bind" in new
    assert shipped_flags("0.32.0+cpu") == new  # a build's local tag is the same release
    assert shipped_flags("0.18.0") is None and shipped_flags("not a version") is None


def test_keys_are_read_as_vllms_parser_reads_them() -> None:
    args = {"max_num_seqs": 1, "compilation-config.mode": 3, "max-num-seq": 4, "port": 1,
            "profile": "x"}
    found = unknown_flags(args, [], KNOWN, skip={"profile"})
    assert [(f.path, f.flag, f.near) for f in found] == [
        (("service", "args", "max-num-seq"), "--max-num-seq", "--max-num-seqs")]
    assert found[0].did_you_mean == "; did you mean --max-num-seqs?"


def test_extra_args_flags_and_their_values() -> None:
    extra = ["--max_num_seqs=4", "-tp", "8", "-n4", "-O3", "-1", "--", "x", "--compilation-config.mode",
             "3", "--nope", "-tp8", "-x"]
    found = unknown_flags({}, extra, KNOWN)
    assert [(f.path[2], f.flag) for f in found] == [(10, "--nope"), (11, "-tp8"), (12, "-x")]
    assert found[0].near is None and found[0].did_you_mean == ""
