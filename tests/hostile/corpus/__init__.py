"""The hostile corpus as data: each case is what a careless or hostile user hands orch (the
command line, the files beside it, what is on disk before), with the class of outcome it must
get. `judge` puts every run in one verdict class; the suite's summary counts them and must
find nothing but `held` (docs/security.md relies on it).

A case's expectation has three parts, judged in this order:
  code   the exit code (docs/cli.md's table): 1 an error, 64 a usage error, 0 handled
  at     where the failure happened, as the output must name it: `file:line:`, the host,
         the step, the flag; a refusal without it is a misplaced failure
  says   what is wrong; a refusal without it is an unclear error, a success without it
         (a warning expected) is a silent acceptance
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

GOOD = "name: ok\nhosts: localhost\n"
PWNED = Path("/tmp/PWNED")  # what a shell payload of the corpus would create
RUN = "{tmp}/runs/x/20260101T000000Z-00000000"  # the run folder `locked_run` makes


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]  # `{tmp}` is the case's folder, `{http}` a port that speaks HTTP, not SSH
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text
    code: int = 1
    says: tuple[str, ...] = ()
    at: tuple[str, ...] = ()
    # Makes what the case needs on disk; may return a function that undoes it afterwards.
    prepare: Callable[[Path], Callable[[], None] | None] | None = None
    # Checks the state the command left (a file not written, a lock released); returns
    # what is wrong, or None.
    after: Callable[[Path], str | None] | None = None
    group: str = ""
    timeout: float = 60

    def __post_init__(self) -> None:  # ("text") is a string, not a tuple: it would pass always
        assert isinstance(self.says, tuple) and isinstance(self.at, tuple), self.name


def section(group: str, *cases: Case) -> list[Case]:
    """The cases of one input class."""
    return [replace(case, group=group) for case in cases]


def locked_run(freeze: str) -> Callable[[Path], None]:
    """A run folder at RUN of plan x on localhost, with `freeze` as its freeze.txt."""
    def prepare(tmp: Path) -> None:
        run = Path(RUN.format(tmp=tmp))
        (run / "hosts" / "localhost").mkdir(parents=True)
        (run / "meta.json").write_text(
            '{"plan": "x", "hosts": ["localhost"], "status": "ok", "command": "apply"}')
        (run / "plan.yaml").write_text(f"name: x\nhosts: localhost\npython: {{venv: {tmp}/v}}\n")
        (run / "hosts" / "localhost" / "freeze.txt").write_text(freeze)
    return prepare


class Verdict(enum.Enum):
    HELD = "held"
    TRACEBACK = "traceback"
    WROTE = "wrote what it must not"
    SILENT = "silent acceptance"
    MISPLACED = "misplaced failure"
    UNCLEAR = "unclear error"


def judge(case: Case, code: int, output: str, left: str | None) -> tuple[Verdict, str]:
    """The verdict on one run of `case` (`left`: what its `after` check found wrong)."""
    said = " ".join(output.split())
    if "Traceback (most recent call last)" in output:
        return Verdict.TRACEBACK, "a traceback"
    if PWNED.exists() or left:
        return Verdict.WROTE, left or f"{PWNED} exists"
    if case.code != 0 and code == 0:
        return Verdict.SILENT, "exit 0 where a refusal was expected"
    if code != case.code:
        return Verdict.MISPLACED, f"exit {code}, expected {case.code}"
    missing_at = [f for f in case.at if f not in said]
    if missing_at:
        return Verdict.MISPLACED, f"does not name where: {missing_at}"
    missing = [f for f in case.says if f not in said]
    if missing:
        verdict = Verdict.SILENT if code == 0 else Verdict.UNCLEAR
        return verdict, f"does not say: {missing}"
    return Verdict.HELD, ""
