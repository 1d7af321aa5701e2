"""A model hub that lies (issue 38, items 1, 2, 9, 10): the real `orch plan` / `orch apply`
with the real huggingface_hub 2.4.0 in a real venv, against a hub of the tests' own on
loopback (fixtures/lying_hub.py). Whatever the hub says, nothing outside the model's folder
is written, removed or followed, and the refusal names what was wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.lying_hub import Lies, Served, lying_hub
from fixtures.orchcli import orch
from fixtures.tmpfs import small_tmpfs

pytestmark = pytest.mark.slow
MIB = 1 << 20
PB = 10 ** 15


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plan's venv with huggingface_hub, made once by an apply without a model."""
    folder = tmp_path_factory.mktemp("venv")
    venv = folder / "v"
    done = orch("apply", write_plan(folder, venv, {"repo": "o/r"}), "--set", "model=null",
                cwd=folder, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


def write_plan(tmp_path: Path, venv: Path, model: dict[str, object]) -> Path:
    plan = {"name": "hostile-hub", "python": {"venv": str(venv), "installer": "pip",
                                              "interpreter": quick_venv.interpreter()},
            "install": {"packages": ["huggingface_hub==2.4.0"]}, "model": model}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def said(done: subprocess.CompletedProcess[str]) -> str:
    """What a command printed, its lines rejoined (a long line wraps at the terminal's width)."""
    return " ".join((done.stdout + done.stderr).split())


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target."""
    return {str(p.relative_to(folder)): os.readlink(p) if p.is_symlink() else p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the model's, with a victim in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("the victim's own bytes\n")
    return folder


def refused(plan: Path, cwd: Path, *expected: str) -> str:
    """`orch apply` refuses, saying each of `expected`, with no traceback."""
    done = orch("apply", plan, cwd=cwd, timeout=600)
    text = said(done)
    assert done.returncode != 0, text
    assert "Traceback" not in text
    squashed = "".join(text.split())  # a long path wraps anywhere at the terminal's width
    for words in expected:
        assert "".join(words.split()) in squashed, text
    return text


def test_names_that_climb_out_of_the_folder_are_refused(venv: Path, tmp_path: Path,
                                                        outside: Path) -> None:
    before = tree(outside)
    lies = Lies([Served("config.json"), Served("../outside/victim.txt", b"overwritten\n"),
                 Served("../outside/new-file.sh", b"#!/bin/sh\necho owned\n")])
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(tmp_path / "model"),
                                           "endpoint": url})
        refused(plan, tmp_path, "the hub's listing: file \"../outside/victim.txt\": an empty, "
                "'.' or '..' segment in it", "check model.endpoint")
    assert tree(outside) == before
    assert not [a for a in lies.asked if "/resolve/" in a]  # nothing fetched on its word


@pytest.mark.parametrize(("name", "why"), [
    ("/etc/cron.d/x", "an absolute path"),
    ("a\\..\\..\\b", "a backslash, NUL or control character in it"),
    ("a\0b", "a backslash, NUL or control character in it"),
    ("\x1b]0;title\x07a", "a backslash, NUL or control character in it"),
    ("a//b", "an empty, '.' or '..' segment in it"),
    ("./config.json", "an empty, '.' or '..' segment in it"),
])
def test_every_bad_name_is_refused_shown_escaped(venv: Path, tmp_path: Path, name: str,
                                                 why: str) -> None:
    lies = Lies([Served("config.json"), Served(name, b"x")])
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(tmp_path / "model"),
                                           "endpoint": url})
        done = orch("plan", plan, cwd=tmp_path, timeout=300)
    text = said(done)
    assert done.returncode == 1 and "Traceback" not in text, text
    assert f"file {json.dumps(name)}: {why}" in text, text
    assert "\x1b" not in done.stdout + done.stderr and "\0" not in done.stdout + done.stderr


def test_a_commit_that_is_a_path_is_refused(venv: Path, tmp_path: Path) -> None:
    lies = Lies([Served("config.json")], sha="../../../outside/by-commit")
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "cache": str(tmp_path / "hf"),
                                           "endpoint": url})
        refused(plan, tmp_path, "the commit \"../../../outside/by-commit\" is not 40 lowercase "
                "hex digits")
    assert not (tmp_path / "outside").exists()


def test_an_etag_that_is_a_path_is_not_used(venv: Path, tmp_path: Path) -> None:
    """The listed sha256 names the blob instead, and the cache is the client's own layout."""
    served = Served("model.safetensors", os.urandom(4096))
    lies = Lies([Served("config.json"), served], etag="../../../outside/by-etag")
    cache = tmp_path / "hf"
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "cache": str(cache), "endpoint": url})
        done = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, said(done)
    assert not (tmp_path / "outside").exists()
    blobs = cache / "models--o--r/blobs"
    assert (blobs / served.true_sha256).read_bytes() == served.body
    snapshot = cache / "models--o--r/snapshots" / str(lies.sha)
    assert (snapshot / "model.safetensors").read_bytes() == served.body


@pytest.mark.parametrize(("sizes", "why"), [
    ((10 * PB, -10 * PB), "its size 10000000000000000 bytes is not between 0 and 100 TB"),
    ((1.5, 2), "its size \"1.5\" is not a whole number"),
    (("12", 2), "its size \"12\" is not a whole number"),
])
def test_sizes_a_hub_cannot_mean_are_refused(venv: Path, tmp_path: Path,
                                            sizes: tuple[object, object], why: str) -> None:
    lies = Lies([Served("a.safetensors", b"a" * 2000, size=sizes[0]),
                 Served("b.safetensors", b"b" * 2000, size=sizes[1])])
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(tmp_path / "model"),
                                           "endpoint": url})
        done = orch("plan", plan, cwd=tmp_path, timeout=300)
    text = said(done)
    assert done.returncode == 1 and "to fetch" not in text, text
    assert f"file \"a.safetensors\": {why}" in text, text


def test_an_endless_body_stops_at_the_listed_size(venv: Path, tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "1200m") as disk:
        lies = Lies([Served("config.json"),
                     Served("model.safetensors", size=1_000_000, sha256="0" * 64, endless=True)])
        with lying_hub(lies) as url:
            plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(disk / "m"),
                                               "endpoint": url})
            refused(plan, tmp_path, "model.safetensors: the hub sent more than its listed "
                    "size of 1000000 bytes: stopped")
        assert all(len(body) <= 1_000_000 for body in tree(disk).values())
        assert not list(disk.rglob("*.incomplete"))


def test_free_space_is_checked_again_while_fetching(venv: Path, tmp_path: Path) -> None:
    """Another writer fills the disk mid-download: the fetch stops at the space kept free."""
    with small_tmpfs(tmp_path / "disk", "1200m") as disk:
        served = Served("model.safetensors", os.urandom(24 * MIB))
        lies = Lies([served], pause_after=12 * MIB)
        with lying_hub(lies) as url:
            plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(disk / "m"),
                                               "endpoint": url})
            running = subprocess.Popen(
                [sys.executable, "-m", "orchestrator.cli", "apply", str(plan)], cwd=tmp_path,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert lies.paused.wait(300)
            partial = next(iter(disk.rglob("*.incomplete")), None)
            deadline = time.monotonic() + 60  # the client writes its first 10 MiB chunk
            while (partial is None or partial.stat().st_size < 10 * MIB) and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
                partial = next(iter(disk.rglob("*.incomplete")), None)
            space = os.statvfs(disk)
            filler = space.f_bavail * space.f_frsize - (1 << 30) + MIB
            (disk / "filler").write_bytes(b"\0" * filler)  # below the 1 GiB kept free now
            lies.resume.set()
            out, _ = running.communicate(timeout=300)
        text = " ".join(out.split())
        assert running.returncode != 0, text
        assert "below the 1073741824 kept free: the download stopped" in text, text
        assert "the filesystem filled up" in text and "Traceback" not in text


def test_a_link_out_of_the_folder_is_replaced_never_its_target_removed(
        venv: Path, tmp_path: Path, outside: Path) -> None:
    before = tree(outside)
    model = tmp_path / "model"
    model.mkdir(mode=0o755)
    (model / "config.json").symlink_to(outside / "victim.txt")  # of another size than listed
    lies = Lies([Served("config.json", b'{"model_type": "x"}')])
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(model), "endpoint": url})
        planned = orch("plan", plan, cwd=tmp_path, timeout=300)
        assert "1 of 1 files (1 linked out of the folder or not a file: replaced)" in \
            said(planned), said(planned)
        done = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, said(done)
    assert "config.json: a link out of the model's folder, or not a file: replaced" in said(done)
    assert tree(outside) == before
    assert not (model / "config.json").is_symlink()
    assert (model / "config.json").read_bytes() == b'{"model_type": "x"}'


def test_a_folder_link_is_not_written_through(venv: Path, tmp_path: Path,
                                              outside: Path) -> None:
    before = tree(outside)
    model = tmp_path / "model"
    model.mkdir(mode=0o755)
    (model / "sub").symlink_to(outside)
    lies = Lies([Served("config.json"), Served("sub/weights.bin", b"w" * 100)])
    with lying_hub(lies) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(model), "endpoint": url})
        refused(plan, tmp_path, f"{model}/sub is a symbolic link: orch does not write through "
                "a link in the model's folder; remove it")
    assert tree(outside) == before


def test_a_link_planted_in_the_partial_folder_is_not_appended_to(
        venv: Path, tmp_path: Path, outside: Path) -> None:
    before = tree(outside)
    served = Served("model.safetensors", os.urandom(4096))
    model = tmp_path / "model"
    partial = model / ".cache/orch/partial"
    partial.mkdir(parents=True, mode=0o755)
    planted = partial / f"model.safetensors.{served.true_sha256}.incomplete"
    planted.symlink_to(outside / "victim.txt")
    with lying_hub(Lies([served])) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(model), "endpoint": url})
        refused(plan, tmp_path, f"{planted} is a symbolic link: orch does not write through a "
                "link in the model's folder; remove it")
    assert tree(outside) == before


@pytest.mark.parametrize("how", ["writable", "owned"])
def test_a_folder_others_may_write_in_is_refused(venv: Path, tmp_path: Path, how: str) -> None:
    model = tmp_path / "model"
    model.mkdir()
    if how == "writable":
        model.chmod(0o777)
        expected = f"{model} is writable by other users (mode 777): they could swap the " \
                   f"model's files; chmod go-w {model}"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        os.chown(model, 65534, 65534)
        expected = f"{model} is owned by uid 65534, not by this user (uid 0)"
    with lying_hub(Lies([Served("config.json")])) as url:
        plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(model), "endpoint": url})
        refused(plan, tmp_path, expected)
    assert list(model.iterdir()) == []


def test_the_host_checks_a_record_again(venv: Path, tmp_path: Path, outside: Path) -> None:
    """A record beside the files (the hub not asked: a pinned commit) that names a file out
    of the folder is refused by the host before any stat, naming the record."""
    before = tree(outside)
    commit = "c" * 40
    record = tmp_path / "model/.cache/orch/model.json"
    record.parent.mkdir(parents=True, mode=0o755)
    record.write_text(json.dumps({"repo": "o/r", "revision": commit, "commit": commit,
                                  "files": [{"path": "../outside/victim.txt", "size": 1}]}))
    plan = write_plan(tmp_path, venv, {"repo": "o/r", "dir": str(tmp_path / "model"),
                                       "revision": commit, "endpoint": "http://127.0.0.1:9"})
    refused(plan, tmp_path, f"{record}: file \"../outside/victim.txt\": an empty",
            "remove orch's record there")
    assert tree(outside) == before


def test_the_fetch_program_checks_the_listing_again(venv: Path, tmp_path: Path,
                                                    outside: Path) -> None:
    """What the controller sends is checked again on the host before any stat or write."""
    from orchestrator.errors import StepError
    from orchestrator.steps.model import fetch
    from orchestrator.transport.local import LocalTransport

    before = tree(outside)
    model = str(tmp_path / "model")
    places = {"kind": "dir", "base": model, "meta": model + "/.cache/orch",
              "partial": model + "/.cache/orch/partial"}
    good = {"path": "config.json", "size": 2, "sha256": None, "blob": "b" * 40, "state": "size"}
    cases: list[tuple[dict[str, object], str]] = [
        ({"path": "../outside/victim.txt"}, "an empty, '.' or '..' segment"),
        ({"size": -1}, "not between 0 and 100 TB"), ({"blob": "../x"}, "is not 40 hex digits"),
        ({"commit": "../../x"}, "is not 40 lowercase hex digits")]
    for bad, words in cases:
        entry = {**good, **{k: v for k, v in bad.items() if k != "commit"}}
        request = {"repo": "o/r", "revision": "main", "commit": bad.get("commit", "a" * 40),
                   "places": places, "files_dir": model, "record": model + "/.cache/orch/m.json",
                   "files": [entry], "endpoint": "http://127.0.0.1:9", "margin": 0}
        with pytest.raises(StepError) as raised:
            fetch(LocalTransport("localhost"), f"{venv}/bin/python", request,
                  lambda event: None, timeout=60)
        assert "Refused: the hub's listing" in str(raised.value) and words in str(raised.value)
    assert tree(outside) == before and not (tmp_path / "model").exists()


@pytest.mark.parametrize(("lie", "words"), [
    ({"commit": "../../../outside/by-commit"}, "the commit \"../../../outside/by-commit\" is not"),
    ({"files": [{"path": "../outside/victim.txt", "size": 1}]},
     "file \"../outside/victim.txt\": an empty, '.' or '..' segment in it"),
    ({"files": [{"path": "a", "size": 10 * PB}, {"path": "b", "size": -10 * PB}]},
     "file \"a\": its size 10000000000000000 bytes is not between 0 and 100 TB"),
    ({"files": [{"path": "a", "size": 1, "sha256": "../../x"}]},
     "its sha256 \"../../x\" is not 64 hex digits"),
])
def test_the_controller_checks_the_hosts_answer_again(lie: dict[str, object], words: str) -> None:
    """A host that passed a lie on (an older fact program, a host that is itself hostile):
    the controller refuses the listing whole, and the step plans nothing on it."""
    from orchestrator.facts import Facts
    from orchestrator.facts.model import model_places, parse
    from orchestrator.plan.models import ModelSpec, PythonEnv
    from orchestrator.steps.model import ModelStep

    places = model_places({"dir": "/models/m", "repo": "o/r"})
    entry: dict[str, Any] = {"places": places, "repo": "o/r", "revision": "main",
                             "commit": "a" * 40, "files": [{"path": "config.json", "size": 2}],
                             "space": ["/models", 10 ** 15], **lie}
    entry["states"] = [[f.get("path"), f.get("size"), "missing"] for f in entry["files"]]
    facts = Facts(extra=parse({"model": entry}))
    spec = ModelSpec(repo="o/r", revision="main", dir="/models/m")
    plan = ModelStep(spec, PythonEnv(venv="/opt/v"), {}).plan(facts)
    assert plan.blocked is not None and words in plan.blocked, plan.blocked
    assert plan.blocked.startswith("model: o/r@main: the hub's listing: ")
    assert not plan.changes
