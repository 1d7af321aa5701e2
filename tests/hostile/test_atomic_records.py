"""Records a later command reads are written whole or not at all, and one that is not whole
(cut by hand, or by an older orch) is a located error, not a traceback.

- A real tmpfs of a few kilobytes that fills while orch writes a record (a run's meta.json
  and plan.yaml, a matrix run's matrix.json, `orch schema -o` through the CLI): the old
  record stays whole, byte for byte, and no temporary file is left.
- Every record `orch compare`, `orch diff`, `orch runs` and `apply --locked` read, written by
  the real writer, then cut in half: the command names the file at `line:column`.
- `--resume` and `orch compare` of a matrix run from another working folder: the variants'
  run folders are found beside the matrix run (a relative path written from elsewhere once
  made every variant run again in new folders, and compare find no results).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.orchcli import orch

from orchestrator.errors import RunFolderError
from orchestrator.runs import matrix_file
from orchestrator.runs.layout import RunLayout
from orchestrator.runs.matrix_file import MatrixRecord, VariantEntry
from orchestrator.runs.run_records import HostFactsRecord, LevelResult, SweepSummary
from orchestrator.runs.writer import RunFolder, write_level, write_sweep

pytestmark = pytest.mark.slow

HOST = "localhost"


def _fill(disk: Path) -> None:
    """Fill the disk to its last page (a file grows until the disk says no)."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _temporaries(disk: Path) -> list[Path]:
    return [p for p in disk.rglob("*") if p.name.endswith(".tmp")]


def test_a_full_disk_leaves_a_runs_records_whole(small_disk: Path) -> None:
    folder = RunFolder.create("x", "0" * 64, root=small_disk / "runs", hosts=[HOST])
    folder.write_plan("name: x\nhosts: localhost\n")
    meta, plan = folder.layout.meta.read_bytes(), folder.layout.plan.read_bytes()
    _fill(small_disk)
    with pytest.raises(RunFolderError, match="No space left on device"):
        folder.write_plan("name: x\nhosts: localhost\ndescription: " + "y" * 20000 + "\n")
    folder.meta.layers = ["z" * 20000]
    with pytest.raises(RunFolderError, match="the disk is full"):
        folder.write_meta()
    assert folder.layout.plan.read_bytes() == plan
    assert folder.layout.meta.read_bytes() == meta
    assert _temporaries(small_disk) == []


def test_a_full_disk_leaves_a_matrix_record_whole(small_disk: Path) -> None:
    folder = matrix_file.new_folder(small_disk / "runs", "mx", "0" * 64)
    record = MatrixRecord(plan="mx", variants=[VariantEntry(index=1, label="a=1", values={})])
    matrix_file.write(folder, record)
    before = (folder / matrix_file.FILE).read_bytes()
    _fill(small_disk)
    record.variants = [VariantEntry(index=i, label="v" * 200, values={"a": i})
                       for i in range(1, 200)]
    with pytest.raises(RunFolderError, match="No space left on device"):
        matrix_file.write(folder, record)
    assert (folder / matrix_file.FILE).read_bytes() == before
    assert matrix_file.read(folder).variants[0].label == "a=1"
    assert _temporaries(small_disk) == []


def test_schema_o_onto_a_full_disk_keeps_the_old_file(small_disk: Path, tmp_path: Path) -> None:
    target = small_disk / "schema.json"
    target.write_text('{"old": true}\n')
    _fill(small_disk)
    result = orch("schema", "-o", target, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "No space left on device" in output
    assert target.read_text() == '{"old": true}\n'  # not emptied, not half written
    assert _temporaries(small_disk) == []


# -- records cut short -----------------------------------------------------------------


def _level(label: str, concurrency: int) -> LevelResult:
    return LevelResult.model_validate({
        "level": label, "mode": "closed", "max_concurrency": concurrency, "completed": 4,
        "duration": 1.0, "output_throughput": 100.0 * concurrency, "mean_e2el_ms": 50.0,
        "p99_ttft_ms": 20.0})


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    """A run with benchmark results, written by the real writer."""
    folder = RunFolder.create("x", "0" * 64, root=tmp_path / "runs", hosts=[HOST])
    folder.write_plan("name: x\nhosts: localhost\npython: {venv: /opt/orch-atomic-v}\n")
    folder.write_facts(HOST, HostFactsRecord(host={"os": "debian 12"}))
    folder.write_freeze(HOST, "a==1\nb==2\n")
    folder.write_model(HOST, {"repo": "org/m", "revision": "main", "commit": "0" * 40})
    bench = folder.host(HOST).bench
    for level in (_level("c1", 1), _level("c2", 2)):
        write_level(bench, level, [])
    write_sweep(bench, "level\nc1\nc2\n", SweepSummary(model="m"))
    folder.finish("complete")
    return folder.path


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


CUT = [
    ("meta.json", ["compare", "{run}"]),
    ("meta.json", ["runs", "--runs-dir", "{root}"]),
    ("meta.json", ["plan", "--locked", "{run}"]),
    ("plan.yaml", ["diff", "{run}", "{run}"]),
    ("hosts/localhost/facts.json", ["compare", "{run}"]),
    ("hosts/localhost/bench/level-c2.json", ["compare", "{run}"]),
    ("hosts/localhost/bench/summary.json", ["report", "{run}", "-o", "{tmp}/r.html"]),
    ("hosts/localhost/model.json", ["plan", "--locked", "{run}"]),
]


@pytest.mark.parametrize(("record", "args"), CUT, ids=[f"{r} by {a[0]}" for r, a in CUT])
def test_a_record_cut_short_is_named_at_its_line(run: Path, tmp_path: Path, record: str,
                                                  args: list[str]) -> None:
    _cut(run / record)
    filled = [a.format(run=run, root=run.parents[1], tmp=tmp_path) for a in args]
    result = orch(*filled, cwd=tmp_path)
    output = result.stdout + result.stderr
    said = " ".join(output.split())
    assert "Traceback" not in output, output
    assert result.returncode == (0 if args[0] == "runs" else 1), output
    assert f"{record}:" in said and ("not valid JSON" in said or "not valid YAML" in said), said
    line = said.split(f"{record}:", 1)[1].split(":", 1)[0]
    assert line.isdigit(), said  # file:line


def test_a_freeze_cut_mid_line_is_named_at_its_line(run: Path, tmp_path: Path) -> None:
    (run / "hosts" / HOST / "freeze.txt").write_text("a==1\nb=")
    result = orch("plan", "--locked", run, cwd=tmp_path)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Traceback" not in said, said
    assert f"{run}/hosts/localhost/freeze.txt:2: 'b=' is not an exact pin" in said


# -- a matrix resumed from another folder ------------------------------------------------


def _matrix_plan(tmp_path: Path) -> Path:
    plan = tmp_path / "p.yaml"
    plan.write_text(f"name: mq-atomic\nhosts: localhost\nvars: {{x: a}}\n"
                    f"files: [{{path: {tmp_path}/out/f.txt, content: \"${{vars.x}}\\n\"}}]\n"
                    "matrix: {vars.x: [a, b]}\n")
    return plan


def _edit(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_resume_from_another_folder_keeps_the_finished_variants(tmp_path: Path) -> None:
    plan = _matrix_plan(tmp_path)
    first = orch("apply", plan, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    (folder,) = (tmp_path / "runs" / "mq-atomic").glob("matrix-*")
    record = json.loads((folder / "matrix.json").read_text())
    second = tmp_path / record["variants"][1]["run"]

    def cut(data: dict[str, object]) -> None:
        data["status"] = "interrupted"
        variants = data["variants"]
        assert isinstance(variants, list)
        variants[1]["status"] = "interrupted"

    _edit(folder / "matrix.json", cut)
    _edit(second / "meta.json", lambda meta: meta.update(status="interrupted"))
    runs_before = sorted(p.name for p in folder.parent.iterdir())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    resumed = orch("apply", plan, "--runs-dir", tmp_path / "runs", "--resume", cwd=elsewhere)
    said = " ".join((resumed.stdout + resumed.stderr).split())
    assert resumed.returncode == 0, said
    assert "variant 1 (x=a): finished before in" in said
    assert f"resuming the run in {second}" in said
    assert sorted(p.name for p in folder.parent.iterdir()) == runs_before  # no new run folder
    assert json.loads((second / "meta.json").read_text())["status"] == "complete"
    assert matrix_file.read(folder).status == "complete"


def test_compare_of_a_matrix_from_another_folder_finds_its_variants(tmp_path: Path) -> None:
    plan = _matrix_plan(tmp_path)
    first = orch("apply", plan, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    (folder,) = (tmp_path / "runs" / "mq-atomic").glob("matrix-*")
    for entry in matrix_file.read(folder).variants:  # results, as a sweep writes them
        assert entry.run is not None
        write_level(RunLayout(tmp_path / entry.run).host(HOST).bench, _level("c1", 1), [])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    compared = orch("compare", folder, cwd=elsewhere)
    said = " ".join((compared.stdout + compared.stderr).split())
    assert compared.returncode == 0, said
    assert "no benchmark results" not in said
    assert "best for peak throughput (no objective given): x=" in said

