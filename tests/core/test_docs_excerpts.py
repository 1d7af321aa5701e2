"""Output quoted in the README and the docs comes from real runs and cannot drift: every
indented block after a marker

    <!-- real output of: orch apply plans/sim/kimi-nvfp4.yaml -->

is held against what that command prints now, run for real here (the shipped simulated plans,
a shorter sweep and start-up so the test is quick). What a short run cannot repeat is left
out of the comparison: figures, times, stamps and hashes (masked), where a sweep plateaus and
how sure (masked), the columns of a table's body (its first cell is kept: the row's label),
its header rows (they wrap with the widths of the figures), what follows a step's status (its
host, step and status are kept), and a quoted `...` skips any lines. Everything else (each
step, in order, every sentence, every table's title and row labels) must be there, word for
word and in order; the text is compared as words, so a line wrapped at another width
reads the same."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.orchcli import orch
from fixtures.sshd import free_port

from orchestrator.limits.rules import LIMITERS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"]  # the docs/ examples are not marked yet (their `... (what)` lines)
MARKER = re.compile(r"^<!-- real output of: (.+?) -->$")
PIVOTS = ("kimi-nvfp4", "minimax-m2.5", "kimi-int4")
COMPARE = "orch compare sim-kimi-nvfp4 sim-minimax-m2.5 sim-kimi-int4"
QUICK = ["bench.concurrency=[1,2]", "bench.max_tokens=64", "service.sim.startup_time_scale=0.01"]
_STAMP = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")
_HASH = re.compile(r"\b[0-9a-f]{12}\b")
_NUMBER = re.compile(r"(?<![A-Za-z\d])\d[\d,.]*")  # not inside names: nvfp4, m2.5
_RULE = re.compile(r"^[\s\u2500-\u257f]*$")  # box drawing only
_STEP = re.compile(r"^(localhost)\s+(\S+)\s+(ok|changed|failed|running|skipped)\b")


def excerpts(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(command, its quoted lines) for each marked block of `path`."""
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        found = MARKER.match(line.strip())
        if not found:
            continue
        block: list[str] = []
        for quoted in lines[index + 1:]:
            if not quoted.strip() and not block:
                continue
            if quoted.startswith("    ") or (block and not quoted.strip()):
                block.append(quoted[4:])
            else:
                break
        yield found.group(1), [line for line in block if line.strip()]


_LIMITER = "|".join(re.escape(name) for name in LIMITERS)
# where a sweep plateaus and how sure: what a short run here cannot repeat of a full one
_PLATEAU = re.compile(rf"(?:(?:still rising|one level), )?(?:{_LIMITER}|cause not measured) (?:from|at) C=\d+")
_LEVEL = re.compile(r"\b([cr])\d[\d.]*\b")  # a level's label: c8, r2.5
_CONFIDENCE = re.compile(r"\((?:high|medium|low) confidence\)")


def shape(line: str) -> str | None:
    """What of a line a real run repeats (module doc); None for what it does not."""
    line = _HASH.sub("#", _STAMP.sub("#", line.rstrip()))
    if _RULE.match(line) or line.lstrip().startswith("┃"):  # a rule; a header (wraps by width)
        return None
    if line.startswith("│"):  # a table's body: its row label (none on a wrapped row's next lines)
        line = line.split("│")[1]
    step = _STEP.match(line.strip())
    if step:
        return " ".join(step.groups())
    line = _CONFIDENCE.sub("(? confidence)", _PLATEAU.sub("PLATEAU", line))
    line = _LEVEL.sub(r"\1#", line)
    return " ".join(_NUMBER.sub("#", line).split()) or None


def words(lines: list[str]) -> list[str]:
    """The shapes of the lines as one stream of words (a line repeated is said once), so
    that text wrapped at another width reads the same."""
    out: list[str] = []
    last = None
    for line in lines:
        kept = shape(line)
        if kept is not None and kept != last:
            out += kept.split()
        last = kept if kept is not None else last
    return out


def missing(quoted: list[str], printed: str) -> list[str]:
    """The quoted segments (between `...` lines) not found, in order and each whole, among
    the printed words."""
    real = words(printed.splitlines())
    segments: list[list[str]] = [[]]
    for line in quoted:
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    at, lost = 0, []
    for segment in segments:
        want = words(segment)
        if not want:
            continue
        found = next((i for i in range(at, len(real) - len(want) + 1) if real[i:i + len(want)] == want), None)
        if found is None:
            lost.append(" ".join(want))
        else:
            at = found + len(want)
    return lost


def test_the_shape_rules_keep_what_matters_and_mask_what_varies() -> None:
    assert shape("localhost      ready      ok       http://127.0.0.1:8000 serves x (23.4s)") == "localhost ready ok"
    assert shape("run folder: runs/sim-kimi-nvfp4/20261130T003855Z-b23326f3") == "run folder: runs/sim-kimi-nvfp4/#"
    assert shape("│ sim-kimi-nvfp4   │  61.2 │ 1,244.5 │") == "sim-kimi-nvfp4"
    assert shape("┡━━━━╇━━━━┩") is None
    assert shape("sim-x: still rising, compute-bound at C=256") == "sim-x: PLATEAU"
    assert missing(["a 1", "...", "b 2"], "a 7\nx\nb 3\n") == []
    assert missing(["a 1", "b 2"], "a 7\nx\nb 3\n") == ["a # b #"]  # a segment is whole
    assert missing(["one two", "three"], "one\ntwo three\n") == []  # wrapped elsewhere
    assert missing(["b 2", "...", "a 1"], "a 7\nb 3\n") == ["a #"]  # order matters


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each quoted command's output, run for real (quickly) in a folder of its own."""
    work = tmp_path_factory.mktemp("docs")
    name, port = f"docs-{work.name[-8:]}", free_port()
    sets = [arg for value in [*QUICK, f"python.venv={work}/venv", f"service.port={port}",
                              f"service.name={name}"] for arg in ("--set", value)]
    out: dict[str, str] = {}
    try:
        for pivot in PIVOTS:
            plan = f"plans/sim/{pivot}.yaml"
            applied = orch("apply", ROOT / plan, *sets, cwd=work, timeout=400)
            assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
            out[f"orch apply {plan}"] = applied.stdout.replace(name, "orch-vllm")
        compared = orch(*COMPARE.split()[1:], cwd=work)
        assert compared.returncode == 0, compared.stderr
        out[COMPARE] = compared.stdout
        yield out
    finally:
        orch("stop", ROOT / f"plans/sim/{PIVOTS[-1]}.yaml", *sets, cwd=work)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_quoted_output_is_what_the_command_prints(doc: Path, printed: dict[str, str]) -> None:
    found = list(excerpts(doc))
    assert found, f"{doc.name} marks no quoted output"
    for command, quoted in found:
        assert command in printed, f"{doc.name}: no real run of {command!r} here (add it to the fixture)"
        assert missing(quoted, printed[command]) == [], f"{doc.name}: {command}"
