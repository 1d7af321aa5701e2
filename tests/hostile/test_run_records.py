"""No writer of orch's writes over a run folder's records (issue 23, class 6): every path a user
names for orch to write (`report -o`, `compare --plots`, `schema -o`, `init --dir`,
`bench --result-dir`, `apply/restart --runs-dir`) is refused with a usage error (64) when
it lies inside a run folder, a symlink into one included, and the run's files stay as they
were. Run through the CLI against a run folder made by the real writer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.orchcli import orch

from orchestrator.runs.writer import RunFolder

SUBCOMMANDS_THAT_WRITE = [
    ("report -o meta.json", lambda run: ["report", str(run), "-o", str(run / "meta.json")]),
    ("report -o a new file in hosts/", lambda run: ["report", str(run), "-o",
                                                    str(run / "hosts" / "localhost" / "r.html")]),
    ("report -o a symlink into the run", lambda run: ["report", str(run), "-o",
                                                      str(run.parents[2] / "link.html")]),
    ("report into <runs-dir>/reports of a run", lambda run: ["report", str(run), "--runs-dir",
                                                             str(run)]),
    ("compare --plots the run folder", lambda run: ["compare", str(run), "--plots", str(run)]),
    ("compare --plots its bench folder", lambda run: ["compare", str(run), "--plots",
                                                      str(run / "hosts" / "localhost" / "bench")]),
    ("schema -o plan.yaml", lambda run: ["schema", "-o", str(run / "plan.yaml")]),
    ("init --dir the run folder", lambda run: ["init", "x", "--sim", "--dir", str(run)]),
    ("bench --result-dir a run's bench", lambda run: [
        "bench", "--url", "http://127.0.0.1:9", "--concurrency", "1",
        "--result-dir", str(run / "hosts" / "localhost" / "bench")]),
    ("apply --runs-dir inside a run", lambda run: ["apply", "p.yaml", "--runs-dir",
                                                   str(run / "hosts")]),
    ("restart --runs-dir inside a run", lambda run: ["restart", "p.yaml", "--runs-dir", str(run)]),
]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = RunFolder.create("x", "0" * 64, root=tmp_path / "runs", hosts=["localhost"])
    folder.write_plan("name: x\nhosts: localhost\n")
    folder.write_freeze("localhost", "a==1\n")
    (tmp_path / "link.html").symlink_to(folder.layout.meta)
    (tmp_path / "p.yaml").write_text("name: x\nhosts: localhost\n")
    return folder.path


def _records(run: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("make_args", [m for _, m in SUBCOMMANDS_THAT_WRITE],
                         ids=[name for name, _ in SUBCOMMANDS_THAT_WRITE])
def test_a_path_inside_a_run_folder_is_refused(run: Path,
                                               make_args: Callable[[Path], list[str]]) -> None:
    before = _records(run)
    result = orch(*make_args(run), cwd=run.parents[2], timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 64, output
    assert "Traceback" not in output
    said = " ".join(output.split())
    assert f"inside the run folder {run.resolve()}" in said, said
    assert "never writes over a run's records" in said
    assert _records(run) == before  # not a byte changed, nothing added


def test_a_path_beside_the_run_folders_is_written(run: Path) -> None:
    # The runs root and a plan's folder hold run folders but are none: writing there is fine.
    for target in (run.parents[1] / "schema.json", run.parent / "schema.json"):
        result = orch("schema", "-o", target, cwd=run.parents[2], timeout=60)
        assert result.returncode == 0, result.stderr
        assert target.is_file()


def test_plan_writes_no_run_folder_so_any_runs_dir_will_do(run: Path) -> None:
    before = _records(run)
    result = orch("plan", "p.yaml", "--runs-dir", run, "--detailed-exitcode", cwd=run.parents[2],
                  timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr  # converged: nothing to do
    assert _records(run) == before


def test_a_working_directory_inside_a_run_folder_is_refused_as_the_default(run: Path) -> None:
    # `orch init` writes under the current folder by default: not inside a run's records.
    before = _records(run)
    result = orch("init", "x", "--sim", cwd=run / "hosts", timeout=60)
    assert result.returncode == 64, result.stderr
    assert "--dir .: that is inside the run folder" in " ".join(result.stderr.split())
    assert _records(run) == before
