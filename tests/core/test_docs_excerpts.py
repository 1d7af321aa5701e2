"""Output quoted in the README and the docs comes from real runs and cannot drift: every
indented or fenced block after a marker

    <!-- real output of: orch apply plans/sim/kimi-nvfp4.yaml -->

is held against what that command prints now, run for real here: the output of one quick run
of `scripts/demo` (README.md: ORCH_DEMO_QUICK=1, a shorter sweep and start-up) for the
commands the demo shows, the others run after it in its folder. What a short run cannot
repeat is left out of the comparison: figures, times, stamps and hashes (masked), where a
sweep plateaus and how sure (masked), the columns of a table's body (its first cell is kept:
the row's label), its header rows (they wrap with the widths of the figures), what follows a
step's status (its host, step and status are kept), and a quoted `...` skips any lines.
Everything else (each step, in order, every sentence, every table's title and row labels)
must be there, word for word and in order; the text is compared as words, so a line wrapped
at another width reads the same. A block may open with `$ COMMAND`, the marker's command, as
a user types it.

The demo runs in a copy of the checkout (tests/fixtures/demo.py) that also holds the files the
docs write out for their examples: a fenced block after `<!-- file: PATH -->` (a bad plan
whose error the doc quotes). A command on the last pivot (`SERVED`) reaches its server,
applied again after the demo stopped it (the same service name, port, venv and start-up
scale are added to it).

Every other `orch ...` line of a code block (README and docs/) must at least parse: orch's
own argument parser, run without executing the command."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures import demo as demo_run
from fixtures.orchcli import orch
from fixtures.ports import free_port

from orchestrator.cli import build_parser
from orchestrator.limits.rules import LIMITERS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- real output of: (.+?) -->$")
FILE = re.compile(r"^<!-- file: (\S+) -->$")
PIVOTS = ("kimi-nvfp4", "minimax-m2.5", "kimi-int4")
SERVED = f"plans/sim/{PIVOTS[-1]}.yaml"
_STAMP = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")
_HASH = re.compile(r"\b[0-9a-f]{12}\b")
_NUMBER = re.compile(r"(?<![A-Za-z\d])\d[\d,.]*")  # not inside names: nvfp4, m2.5
_RULE = re.compile(r"^[\s\u2500-\u257f]*$")  # box drawing only
_STEP = re.compile(r"^(localhost)\s+(\S+)\s+(ok|changed|failed|running|skipped|pending)\b")


def _span(lines: list[str], start: int) -> range:
    """The indexes of the lines of the indented or fenced block at `start` (blank lines
    before it skipped; a fenced block's fences left out)."""
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start < len(lines) and lines[start].startswith("```"):
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        return range(start + 1, end)
    end = start
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    return range(start, end)


def _block(lines: list[str], start: int) -> list[str]:
    span = _span(lines, start)
    fenced = span.start > 0 and lines[span.start - 1].startswith("```")
    return [lines[i] if fenced else lines[i][4:] for i in span]


def excerpts(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(command, its quoted lines) for each marked block of `path`."""
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        found = MARKER.match(line.strip())
        if found:
            quoted = [line for line in _block(lines, index + 1) if line.strip()]
            if quoted and quoted[0].startswith("$ "):
                assert quoted[0] == f"$ {found.group(1)}", f"{path.name}: {quoted[0]!r} is not the marker's"
                quoted = quoted[1:]
            yield found.group(1), quoted


def example_files(path: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of each file `path` writes out for its examples."""
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        found = FILE.match(line.strip())
        if found:
            yield found.group(1), "\n".join(_block(lines, index + 1)) + "\n"


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


def test_blocks_are_read_indented_or_fenced_with_the_typed_command(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- real output of: orch x -->\n    $ orch x\n    one 1\n\n    two\nprose\n"
                   "<!-- real output of: orch y -->\n\n```text\nthree\n```\n"
                   "<!-- file: plans/p.yaml -->\n```yaml\nname: p\n```\n")
    assert list(excerpts(doc)) == [("orch x", ["one 1", "two"]), ("orch y", ["three"])]
    assert list(example_files(doc)) == [("plans/p.yaml", "name: p\n")]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str], str]]:
    """One quick `scripts/demo` in a copy of the checkout: the folder, the settings that give
    its servers a port, name and venv of their own (`served`), and what it printed."""
    work = demo_run.checkout(tmp_path_factory.mktemp("docs") / "checkout")
    settings = [f"python.venv={work}/venv", f"service.port={free_port()}", f"service.name=docs-{work.parent.name[-8:]}"]
    try:
        yield work, settings, demo_run.run_demo(work, settings=settings, timeout=600)
    finally:
        orch("stop", SERVED, *_sets(settings), cwd=work)


def _sets(settings: list[str]) -> list[str]:
    return [arg for value in settings for arg in ("--set", value)]


@pytest.fixture(scope="module")
def printed(demo: tuple[Path, list[str], str]) -> dict[str, str]:
    """Each marked command's output (stdout, then stderr): the demo's own run of it, else run
    for real in the demo's folder (after the demo, so its runs are there to compare)."""
    work, settings, transcript = demo
    name = settings[-1].split("=", 1)[1]
    for doc in DOCS:
        for path, text in example_files(doc):
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
    # what the server's launch carries: a command on SERVED names it as the apply did
    served = [*_sets(settings), "--set", demo_run.QUICK_STARTUP]
    shown = demo_run.commands(transcript, [*settings, *demo_run.QUICK, demo_run.QUICK_STARTUP])

    def run(command: str, *extra: str, timeout: float = 120) -> str:
        done = orch(*shlex.split(command)[1:], *extra, cwd=work, timeout=timeout)
        return (done.stdout + done.stderr).replace(name, "orch-vllm").replace(str(work), ".")

    # the demo stopped the last pivot's server: the commands on it find it serving again
    again = run(f"orch apply {SERVED} --skip bench", *served, *_sets(demo_run.QUICK))
    assert "localhost      collect    ok" in again, again[-3000:]
    out: dict[str, str] = {}
    for doc in DOCS:
        for command, _ in excerpts(doc):
            if demo_run.typed(command) in shown:
                out[command] = shown[demo_run.typed(command)].replace(name, "orch-vllm").replace(str(work), ".")
            elif command not in out:
                out[command] = run(command, *(served if SERVED in command else ()))
    return out


def test_the_quick_demo_runs_the_docs_commands_it_stands_for(demo: tuple[Path, list[str], str]) -> None:
    work, settings, transcript = demo
    shown = demo_run.commands(transcript, [*settings, *demo_run.QUICK, demo_run.QUICK_STARTUP])
    ran = [command for command in demo_run.BY_DEMO.values() if command is not None]
    assert [command for command in ran if demo_run.typed(command) not in shown] == [], list(shown)
    assert (work / "plans/sim/kimi-nvfp4-tune.tuned.yaml").is_file()  # the tune's winner
    assert list((work / "runs" / "reports").glob("*-sim-kimi-nvfp4-vs-sim-minimax-m2.5-vs-sim-kimi-int4.html"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_quoted_output_is_what_the_command_prints(doc: Path, printed: dict[str, str]) -> None:
    for command, quoted in excerpts(doc):
        assert missing(quoted, printed[command]) == [], f"{doc.name}: {command}\n{printed[command]}"


def test_the_check_fails_when_an_excerpt_drifts(printed: dict[str, str], tmp_path: Path) -> None:
    copy = tmp_path / "plans.md"
    copy.write_text((ROOT / "docs" / "plans.md").read_text().replace(
        "vLLM 0.17.1 has no flag --tensor-paralel-size", "vLLM 0.17.1 has no option --tensor-paralel-size", 1))
    (command, quoted), (same, kept) = next(excerpts(copy)), next(excerpts(ROOT / "docs" / "plans.md"))
    assert command == same and quoted != kept
    assert missing(kept, printed[command]) == []
    assert missing(quoted, printed[command]) != []


OPERATOR = re.compile(r"^[|&;<>]+$")


def command_lines(path: Path, programs: tuple[str, ...] = ("orch",)) -> Iterator[tuple[int, list[str]]]:
    """(line number, arguments) of each `orch ...` line (or one of another of `programs`, its
    name then first) of a code block outside the marked output blocks (those run for real):
    `$ `, VAR=value prefixes, comments, a `...` for left-out arguments, and what follows a
    pipe or redirection are left out."""
    lines = path.read_text().splitlines()
    marked = {i for m, line in enumerate(lines) if MARKER.match(line.strip()) for i in _span(lines, m + 1)}
    fenced, indented, pending = False, False, ""
    for index, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        indented = line.startswith("    ") and (indented or index == 0 or not lines[index - 1].strip())
        if index in marked or not (fenced or indented):
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        argv = _argv(text.removeprefix("$ "), programs)
        if argv is not None:
            yield index + 1, argv


def _argv(text: str, programs: tuple[str, ...]) -> list[str] | None:
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        found = list(lexer)
    except ValueError:  # not shell: a quote left open in prose-like text
        return None
    while found and re.match(r"^[A-Z_][A-Z0-9_]*=", found[0]):
        found = found[1:]
    if not found or found[0] not in programs:
        return None
    end = next((i for i, word in enumerate(found) if OPERATOR.match(word)), len(found))
    return [word for word in found[programs == ("orch",):end] if word != "..."]


def _parses(argv: list[str]) -> str | None:
    """None when orch's parser takes `argv`, else what it said."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            build_parser("*").parse_args(argv)
    except SystemExit as exit_:
        return None if exit_.code == 0 else said.getvalue().strip()
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_line_shown_parses(doc: Path) -> None:
    refused = [f"{doc.name}:{number}: orch {shlex.join(argv)}: {said}"
               for number, argv in command_lines(doc) if (said := _parses(argv)) is not None]
    assert refused == []


def test_the_parse_check_refuses_what_orch_would(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```sh\n$ HF_TOKEN=x orch apply p.yaml --sett a=1   # typo\n"
                   "orch runs | grep kimi\norch compare a b ... > t.txt\n```\n")
    assert [argv for _, argv in command_lines(doc)] == [
        ["apply", "p.yaml", "--sett", "a=1"], ["runs"], ["compare", "a", "b"]]
    assert "unrecognized arguments: --sett" in (_parses(["apply", "p.yaml", "--sett", "a=1"]) or "")
    assert _parses(["runs"]) is None
