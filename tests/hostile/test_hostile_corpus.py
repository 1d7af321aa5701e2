"""The hostile corpus (tests/hostile/corpus/: cases as data, each with the class of outcome it
must get), run through the CLI as a user runs it, judged, and summed up: the summary must count
no silent acceptance, no misplaced failure, no traceback.

Together with the bad-plan corpus (tests/plan/bad/, also run here through `orch validate`)
and the property tests of test_hostile_strings.py, this is the hostile corpus the security
model in docs/security.md relies on; `test_the_corpus_is_large_enough` counts it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures import zygote
from fixtures.orchcli import orch
from hostile.corpus import GOOD, Case, Verdict, judge
from hostile.corpus.all import CASES

pytestmark = pytest.mark.slow

BAD_PLANS = Path(__file__).resolve().parents[1] / "plan" / "bad"


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    """A port that speaks HTTP, not SSH."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    def answer(conn: socket.socket) -> None:
        # Read what the client sent first (an HTTP request, or an SSH banner): closing with
        # it unread would reset the connection before the client reads the answer.
        with conn:
            conn.settimeout(2)
            with contextlib.suppress(OSError):
                conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                             b"Connection: close\r\n\r\n")
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):
                    pass
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    server.close()


@dataclass(frozen=True)
class Ran:
    verdict: Verdict
    why: str
    output: str


def _run(case: Case, folder: Path, http_port: int) -> Ran:
    for relative, text in case.files.items():
        (folder / relative).write_text(text.replace("{http}", str(http_port)))
    undo = case.prepare(folder) if case.prepare is not None else None
    try:
        args = [a.replace("{tmp}", str(folder)).replace("{http}", str(http_port)) for a in case.args]
        result = orch(*args, cwd=folder, timeout=case.timeout)
    finally:
        if undo is not None:
            undo()
    output = result.stdout + result.stderr
    left = case.after(folder) if case.after is not None else None
    verdict, why = judge(case, result.returncode, output, left)
    return Ran(verdict, why, output)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, http_port: int) -> dict[str, Ran]:
    """Every case run once, four at a time (each is a CLI process that mostly waits)."""
    folders = {case.name: tmp_path_factory.mktemp("case") for case in CASES}
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = pool.map(lambda case: _run(case, folders[case.name], http_port), CASES)
        return {case.name: ran for case, ran in zip(CASES, runs, strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(case: Case, corpus: dict[str, Ran]) -> None:
    ran = corpus[case.name]
    assert ran.verdict is Verdict.HELD, f"{ran.verdict.value}: {ran.why}\n{ran.output}"


def test_the_summary_counts_no_silent_acceptance_and_no_misplaced_failure(
        corpus: dict[str, Ran]) -> None:
    counts = Counter(ran.verdict for ran in corpus.values())
    groups = Counter(case.group for case in CASES)
    print(f"\nhostile corpus: {len(CASES)} cases in {len(groups)} input classes")
    for verdict in Verdict:
        print(f"  {verdict.value:<24} {counts[verdict]}")
    for case in CASES:
        ran = corpus[case.name]
        if ran.verdict is not Verdict.HELD:
            print(f"  - [{case.group}] {case.name}: {ran.verdict.value}: {ran.why}")
    assert counts[Verdict.SILENT] == 0 and counts[Verdict.MISPLACED] == 0
    assert counts[Verdict.HELD] == len(CASES)


def test_every_case_has_a_unique_name_and_a_class() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.group for c in CASES)


def test_the_judge_puts_each_outcome_in_its_class() -> None:
    refused = Case("x", [], says=("what",), at=("p.yaml:3:",))
    warned = Case("y", [], code=0, says=("warning",))
    assert judge(refused, 1, "p.yaml:3: what", None) == (Verdict.HELD, "")
    assert judge(refused, 0, "", None)[0] is Verdict.SILENT
    assert judge(warned, 0, "done", None)[0] is Verdict.SILENT
    assert judge(refused, 1, "what", None)[0] is Verdict.MISPLACED
    assert judge(refused, 64, "p.yaml:3: what", None)[0] is Verdict.MISPLACED
    assert judge(refused, 1, "p.yaml:3: something", None)[0] is Verdict.UNCLEAR
    assert judge(refused, 1, "Traceback (most recent call last):", None)[0] is Verdict.TRACEBACK
    assert judge(refused, 1, "p.yaml:3: what", "wrote /etc/x")[0] is Verdict.WROTE


def test_every_bad_plan_fails_clearly_through_the_cli(tmp_path: Path) -> None:
    plans = sorted(p for p in BAD_PLANS.glob("*.yaml") if not _needs_layers(p))
    result = zygote.run(["validate", *map(str, plans)], cwd=BAD_PLANS, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.count("FAIL ") == len(plans)


def test_output_to_a_full_disk_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(GOOD)
    for args in (["validate", "p.yaml"], ["runs"]):
        with open("/dev/full", "w") as full:
            result = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=tmp_path,
                                    stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert "error: cannot write the output: No space left on device" in result.stderr


def test_init_with_stdin_closed_asks_nothing(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli", "init", "x", "--sim"],
                            cwd=tmp_path, stdin=None, capture_output=True, text=True, timeout=60,
                            preexec_fn=lambda: os.close(0))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "plans" / "x.yaml").is_file()


def _needs_layers(path: Path) -> bool:
    head = path.read_text().splitlines()[:6]
    return any(line.startswith(("# set:", "# overlay:")) for line in head)


def test_the_corpus_is_large_enough() -> None:
    bad_plans = len(list(BAD_PLANS.glob("*.yaml")))
    total = len(CASES) + bad_plans
    print(f"hostile corpus: {len(CASES)} CLI cases + {bad_plans} bad plans = {total} cases")
    assert total >= 100
