"""The corpus's run-folder round: `--resume` pointed at what it must not continue, matrix
values that would become paths or labels that collide, `--limit-variants` a careless user
types, and `--locked RUN` (and `orch diff`/`orch compare`) on a run folder edited by hand.

The matrix runs are real: `prepare` applies a small matrix plan (two variants that write a
file on this machine, no server) through the CLI, then marks the second variant cut, as
Ctrl-C leaves it. `after` checks that a refused command left every record as it was and
made no run folder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from fixtures import zygote
from hostile.corpus import RUN, Case, locked_run, section

MATRIX = "{tmp}/runs/mq/matrix-1"  # where `_matrix_run` puts the matrix run
MATRIX_PLAN = ("name: mq\nhosts: localhost\nvars: {{x: a, n: 1}}\n"
               "files: [{{path: {tmp}/out/f.txt, content: \"${{vars.x}} ${{vars.n}}\\n\"}}]\n"
               "matrix:\n  vars.x: {values}\n")


def _plan(tmp: Path, values: str = "[a, b]", extra: str = "") -> None:
    (tmp / "p.yaml").write_text(MATRIX_PLAN.format(tmp=tmp, values=values) + extra)


def _snapshot(tmp: Path) -> dict[str, str]:
    runs = tmp / "runs"
    return {str(p.relative_to(runs)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(runs.rglob("*"))} if runs.is_dir() else {}


def _matrix_run(edit: Callable[[Path], object] | None = None, *, cut: bool = True,
                then: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """A real matrix run of p.yaml (variant 2 cut when `cut`), moved to MATRIX; `edit`
    changes its files, `then` the plan; what is on disk is kept to compare with after."""
    def prepare(tmp: Path) -> None:
        _plan(tmp)
        # --wait: the cases run four at a time, and an apply holds the plan's lock on the host
        done = zygote.run(["apply", "p.yaml", "--wait"], cwd=tmp, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        found = next((tmp / "runs" / "mq").glob("matrix-*"))
        folder = found.rename(tmp / "runs" / "mq" / "matrix-1")
        if cut:
            record = json.loads((folder / "matrix.json").read_text())
            record["status"] = "interrupted"
            record["variants"][1]["status"] = "interrupted"
            meta_file = tmp / record["variants"][1]["run"] / "meta.json"
            meta = json.loads(meta_file.read_text())
            meta["status"] = "interrupted"
            meta_file.write_text(json.dumps(meta))
            (folder / "matrix.json").write_text(json.dumps(record, indent=2))
        if edit is not None:
            edit(folder)
        if then is not None:
            then(tmp)
        (tmp / "before.json").write_text(json.dumps(_snapshot(tmp)))
    return prepare


def _unchanged(tmp: Path) -> str | None:
    before = json.loads((tmp / "before.json").read_text())
    now = _snapshot(tmp)
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    return f"changed under runs/: {changed[:4]}" if changed else None


def _record_edit(change: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "matrix.json"
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record, indent=2))
    return edit


def _cut_record(folder: Path) -> None:
    path = folder / "matrix.json"
    path.write_bytes(path.read_bytes()[:300])


def _cut_variant_meta(folder: Path) -> None:
    record = json.loads((folder / "matrix.json").read_text())
    meta = folder.parent.parent.parent / record["variants"][0]["run"] / "meta.json"
    meta.write_bytes(meta.read_bytes()[:40])


def _run_of(index: int, *, path: str | None = None, of: int = 0) -> Callable[[dict[str, object]], None]:
    """Variant `index`'s run edited to `path`, or to variant `of`'s run."""
    def change(record: dict[str, object]) -> None:
        variants = record["variants"]
        assert isinstance(variants, list)
        variants[index]["run"] = path if path is not None else variants[of]["run"]
    return change


def _link_variant(tmp: Path) -> None:
    """{tmp}/variant: the first variant's run folder, by a path that names no matrix."""
    record = json.loads((tmp / "runs" / "mq" / "matrix-1" / "matrix.json").read_text())
    (tmp / "variant").symlink_to(tmp / record["variants"][0]["run"])


def _other_plan(tmp: Path) -> None:
    (tmp / "o.yaml").write_text((tmp / "p.yaml").read_text().replace("name: mq", "name: other"))


def _plain_plan(tmp: Path) -> None:
    (tmp / "plain.yaml").write_text(f"name: mq\nhosts: localhost\nfiles: [{{path: {tmp}/out/g, "
                                    "content: x}]\n")


def _gone(tmp: Path) -> None:
    shutil.rmtree(tmp / "runs" / "mq" / "matrix-1")
    (tmp / "before.json").write_text(json.dumps(_snapshot(tmp)))


def _edit_run(path: str, text: str | bytes | None) -> Callable[[Path], None]:
    """After `locked_run`: one file of the run folder written (or removed: None)."""
    def prepare(tmp: Path) -> None:
        locked_run("a==1\nb==2\n")(tmp)
        target = Path(RUN.format(tmp=tmp)) / path
        if text is None:
            target.unlink()
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text if isinstance(text, bytes) else text.encode())
    return prepare


def _run_with_model(repo: str) -> Callable[[Path], None]:
    def prepare(tmp: Path) -> None:
        locked_run("a==1\n")(tmp)
        run = Path(RUN.format(tmp=tmp))
        with open(run / "plan.yaml", "a") as plan:
            plan.write("model: {repo: org/served}\n")
        (run / "hosts" / "localhost" / "model.json").write_text(json.dumps(
            {"repo": repo, "revision": "main", "commit": "0" * 40, "files": []}))
    return prepare


_LONG = "x" * 300
_MATRIX_NAMES = "name: mn\nhosts: localhost\npython: {venv: /opt/v}\nservice: {model: m, name: ok}\n"

CASES = [
    *section("resume",
        Case("--resume a finished matrix run", ["apply", "p.yaml", "--resume", MATRIX],
             prepare=_matrix_run(cut=False), after=_unchanged, code=64,
             says=("that matrix run completed; nothing is left to run",)),
        Case("--resume another plan's matrix run", ["apply", "o.yaml", "--resume", MATRIX],
             prepare=_matrix_run(then=_other_plan), after=_unchanged, code=64,
             at=("--resume",), says=("that matrix run is of plan 'mq', not 'other'",)),
        Case("--resume a variant's run folder, not the matrix run",
             ["apply", "p.yaml", "--resume", "{tmp}/variant"],
             prepare=_matrix_run(then=_link_variant), after=_unchanged, code=64,
             says=("not a matrix run", "variant 1 (x=a) of the matrix run")),
        Case("--resume a matrix run whose plan gained a variant",
             ["apply", "p.yaml", "--resume", MATRIX], code=64, after=_unchanged,
             prepare=_matrix_run(then=lambda tmp: _plan(tmp, "[a, b, c]")),
             says=("the plan's matrix changed since that run", "variant 3 (x=c) is new")),
        Case("--resume a matrix run whose plan lost a variant",
             ["apply", "p.yaml", "--resume", MATRIX], code=64, after=_unchanged,
             prepare=_matrix_run(then=lambda tmp: _plan(tmp, "[a]")),
             says=("variant 2 (x=b) is gone",)),
        Case("--resume a matrix run whose plan changed a value",
             ["apply", "p.yaml", "--resume", MATRIX], code=64, after=_unchanged,
             prepare=_matrix_run(then=lambda tmp: _plan(tmp, "[a, c]")),
             says=("variant 2 was x=b, now x=c",)),
        Case("--resume a matrix run whose base plan was edited",
             ["apply", "p.yaml", "--resume", MATRIX, "--set", "vars.n=2"], code=64,
             prepare=_matrix_run(), after=_unchanged,
             says=("variant 1 (x=a): its plan changed", "vars.n: 1 -> 2")),
        Case("--resume a matrix folder that is gone", ["apply", "p.yaml", "--resume", MATRIX],
             prepare=_matrix_run(then=_gone), after=_unchanged, code=64,
             at=("runs/mq/matrix-1",), says=("no such folder",)),
        Case("--resume a matrix run whose record was cut", ["apply", "p.yaml", "--resume", MATRIX],
             prepare=_matrix_run(_cut_record), after=_unchanged,
             at=("matrix-1/matrix.json:",), says=("not valid JSON", "cut short")),
        Case("--resume a matrix run whose record is empty", ["apply", "p.yaml", "--resume", MATRIX],
             prepare=_matrix_run(lambda f: (f / "matrix.json").write_text("")), after=_unchanged,
             at=("matrix-1/matrix.json",), says=("the file is empty",)),
        Case("--resume a matrix run whose record is a list", ["apply", "p.yaml", "--resume", MATRIX],
             prepare=_matrix_run(lambda f: (f / "matrix.json").write_text("[]\n")),
             after=_unchanged, at=("matrix-1/matrix.json",),
             says=("expected a JSON object",)),
        Case("--resume a matrix run whose variant's run climbs out",
             ["apply", "p.yaml", "--resume", MATRIX], after=_unchanged,
             prepare=_matrix_run(_record_edit(_run_of(1, path="../../../../etc"))),
             at=("matrix-1/matrix.json", "variants.1.run"),
             says=("is not a run folder beside the matrix run",)),
        Case("--resume a matrix run whose variant's run is another variant's",
             ["apply", "p.yaml", "--resume", MATRIX], after=_unchanged,
             prepare=_matrix_run(_record_edit(_run_of(1, of=0))),
             at=("matrix-1/matrix.json", "variants.1.run"), says=("ran another plan",)),
        Case("compare a matrix run whose variant's run leads elsewhere", ["compare", MATRIX],
             prepare=_matrix_run(_record_edit(_run_of(0, path="/etc"))), after=_unchanged,
             code=0, says=("1 x=a: missing: its run folder /etc is not there",)),
        Case("compare a matrix run whose variant's meta.json was cut", ["compare", MATRIX],
             prepare=_matrix_run(_cut_variant_meta), after=_unchanged, code=0,
             says=("1 x=a: unreadable:", "meta.json:3:", "not valid JSON")),
        Case("--resume of a plan without a matrix, at a matrix run",
             ["apply", "plain.yaml", "--resume", MATRIX], after=_unchanged,
             prepare=_matrix_run(then=_plain_plan), at=("matrix-1",), code=64,
             says=("that is a matrix run, and plan mq has no matrix",)),
        Case("--resume with nothing left to resume", ["apply", "p.yaml", "--resume"],
             prepare=_matrix_run(cut=False), after=_unchanged, code=64,
             says=("no unfinished matrix run",)),
    ),
    *section("locked run folders edited by hand",
        Case("--locked: plan.yaml with a YAML error", ["plan", "--locked", RUN],
             prepare=_edit_run("plan.yaml", "name: x\nhosts: [localhost\nfoo: 1\n"),
             at=("x/20260101T000000Z-00000000/plan.yaml:3:",), says=("YAML",)),
        Case("--locked: plan.yaml of another plan", ["plan", "--locked", RUN],
             prepare=_edit_run("plan.yaml", "name: zz\nhosts: localhost\npython: {venv: /opt/v}\n"),
             at=("plan.yaml:1:",), says=("the plan is named 'zz'", "says the run applied 'x'")),
        Case("--locked: plan.yaml names a host the run did not run on",
             ["plan", "--locked", RUN], code=0,
             prepare=_edit_run("plan.yaml", "name: x\nhosts: [localhost, gpu9]\n"
                                            "python: {venv: /opt/orch-corpus-v}\n"),
             says=("names gpu9 too, which the run did not run on", "redeploys localhost only")),
        Case("--locked: a hosts/ folder meta.json does not list", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/gpu9/freeze.txt", "a==1\n"),
             at=("hosts/gpu9",), says=("'gpu9' is not a host of the run",)),
        Case("--locked: meta.json lists a host with no folder", ["plan", "--locked", RUN],
             prepare=_edit_run("meta.json", '{"plan": "x", "hosts": ["localhost", "gpu9"], '
                                            '"status": "complete"}'),
             at=("hosts/gpu9/freeze.txt",), says=("is missing", "--limit localhost")),
        Case("--locked: freeze.txt missing", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/localhost/freeze.txt", None),
             says=("froze no package set",)),
        Case("--locked: freeze.txt empty", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/localhost/freeze.txt", ""),
             at=("hosts/localhost/freeze.txt",), says=("empty", "uninstall everything")),
        Case("--locked: freeze.txt not UTF-8", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/localhost/freeze.txt", b"a==1\n\xff\xfe==1\n"),
             at=("hosts/localhost/freeze.txt:2:",), says=("not an exact pin",)),
        Case("--locked: model.json garbage", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/localhost/model.json", "{not json"),
             at=("hosts/localhost/model.json:1:",), says=("not valid JSON",)),
        Case("--locked: model.json without a commit", ["plan", "--locked", RUN],
             prepare=_edit_run("hosts/localhost/model.json", '{"repo": "org/a"}'),
             at=("hosts/localhost/model.json",), says=("expected the weights' record",)),
        Case("--locked: model.json names another repo", ["plan", "--locked", RUN],
             prepare=_run_with_model("org/other"), at=("hosts/localhost/model.json",),
             says=("names the repo 'org/other'", "fetches 'org/served'")),
        Case("--locked: meta.json not JSON", ["plan", "--locked", RUN],
             prepare=_edit_run("meta.json", '{"plan": "x",\n'),
             at=("meta.json:2:",), says=("not valid JSON", "cut short")),
        Case("--locked: meta.json empty", ["apply", "--locked", RUN],
             prepare=_edit_run("meta.json", ""), at=("meta.json",), says=("the file is empty",)),
        Case("diff: a run's plan.yaml with a YAML error", ["diff", RUN, RUN],
             prepare=_edit_run("plan.yaml", "name: x\nhosts: [localhost\nfoo: 1\n"),
             at=("plan.yaml:3:",), says=("not valid YAML",)),
        Case("diff: a run's model.json garbage", ["diff", RUN, RUN], code=0,
             prepare=_edit_run("hosts/localhost/model.json", "{not json"),
             at=("hosts/localhost/model.json:1:",),
             says=("warning:", "the weights it served are not compared")),
        Case("compare: a run's meta.json not JSON", ["compare", RUN],
             prepare=_edit_run("meta.json", "{"), at=("meta.json:1:",), says=("not valid JSON",)),
        Case("runs: a run's meta.json cut short", ["runs", "--runs-dir", "{tmp}/runs"], code=0,
             prepare=_edit_run("meta.json", '{"plan": "x", "hos'), says=("meta.json:1:",)),
    ),
    *section("matrix names",
        Case("a matrix value climbing out as a service name", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + "matrix:\n  service.name: ['../x', ok]\n"},
             at=("p.yaml:6:",), says=("variant 1 of 2", "expected a service name")),
        Case("a matrix value with a slash as a venv", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + "matrix:\n  python.venv: [/opt/a/../../etc, /opt/b]\n"},
             at=("p.yaml:6:",), says=("'..' is not allowed in a host path",)),
        Case("a matrix value with a NUL", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + 'matrix:\n  service.name: ["a\\0b", ok]\n'},
             at=("p.yaml:6:",), says=("NUL",)),
        Case("a matrix value with a line break", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + 'matrix:\n  env.X: ["a\\nb", ok]\n'},
             at=("p.yaml:6:",), says=('(X="a\\nb")', "cannot hold a line break")),
        Case("a very long matrix value", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + f"matrix:\n  service.name: [{_LONG}, ok]\n"},
             at=("p.yaml:6:",), says=("(name=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...xxxxxxxxxx)",
                                      "at most 64 characters")),
        Case("a unicode matrix value", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _MATRIX_NAMES + "matrix:\n  service.name: [ünï, ok]\n"},
             at=("p.yaml:6:",), says=("(name=ünï)", "expected a service name")),
        Case("two variants whose labels read alike", ["plan", "{tmp}/p.yaml"], code=0,
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix:\n  vars.x: [1, '1']\n"},
             says=("x=1 (variant 1)", "x=1 (variant 2)")),
        Case("an include entry naming an unknown key", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: mn\nhosts: localhost\nbench: {max_tokens: 8}\nmatrix:\n"
                              "  bench.max_tokens: [8, 16]\n  include:\n"
                              "    - {bench.max_tokens: 8, bench.max_tokns: 5}\n"},
             at=("p.yaml:6:",), says=("unknown key 'max_tokns'", "did you mean 'max_tokens'")),
        Case("an include entry that makes a section the wrong shape", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix:\n  vars.x: [1, 2]\n"
                              "  include:\n    - {vars.x: 1, smoke.x: 1}\n"},
             at=("p.yaml:5:",), says=("it sets smoke.x=1", "expected a list")),
        Case("--limit-variants a negative number", ["plan", "{tmp}/p.yaml", "--limit-variants=-1"],
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: [1, 2]}\n"},
             code=64, at=("--limit-variants",), says=("cannot read '-1'",)),
        Case("--limit-variants a range backwards", ["plan", "{tmp}/p.yaml", "--limit-variants", "2-1"],
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: [1, 2]}\n"},
             code=64, at=("--limit-variants",), says=("runs backwards",)),
        Case("--limit-variants a huge range", ["plan", "{tmp}/p.yaml", "--limit-variants",
                                               "1-99999999999999"], timeout=30,
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: [1, 2]}\n"},
             code=64, at=("--limit-variants",), says=("no variant 99999999999999",)),
        Case("--limit-variants nothing", ["plan", "{tmp}/p.yaml", "--limit-variants", ","],
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: [1, 2]}\n"},
             code=64, at=("--limit-variants",), says=("names no variant",)),
        Case("--limit-variants a value holding a comma",
             ["plan", "{tmp}/p.yaml", "--limit-variants", "x=a,b"], code=0,
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: ['a,b', c]}\n"},
             says=("Matrix mn: 1 variants",)),
        Case("--limit-variants a string that reads as a number",
             ["plan", "{tmp}/p.yaml", "--limit-variants", 'x="1"'], code=0,
             files={"p.yaml": "name: mn\nhosts: localhost\nmatrix: {vars.x: [1, '1']}\n"},
             says=("Matrix mn: 1 variants",)),
    ),
]
