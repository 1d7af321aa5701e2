"""The `model:` section end to end: `orch plan` and `orch apply` (real CLI, real venv with the
real huggingface_hub 2.4.0 that the apply itself installs) against the stand-in hub on
loopback (orch sim hub), serving the tiny model scripts/tiny_model.py makes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import SECRET, last_run, orch
from fixtures.ports import free_port
from fixtures.tmpfs import small_tmpfs
from fixtures.vllm_cpu import make_model

from orchestrator.sim.hub import StandInHub, running_hub

pytestmark = pytest.mark.slow
MIB = 1 << 20


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, with a 24 MiB shard beside it: over two of the client's 10 MiB write
    chunks, so a cut download leaves a partial file to resume."""
    folder = make_model(tmp_path_factory.mktemp("tiny") / "model")
    (folder / "extra.safetensors").write_bytes(os.urandom(24 * MIB))
    return folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInHub]:
    with running_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("venv") / "v"


def write_plan(tmp_path: Path, venv: Path, model: dict[str, object]) -> Path:
    plan = {"name": "weights", "python": {"venv": str(venv), "installer": "pip",
                                          "interpreter": quick_venv.interpreter()},
            "install": {"packages": ["huggingface_hub==2.4.0"]}, "model": model}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def publish(hub: StandInHub, source: Path, repo: str, tmp_path: Path) -> str:
    """A copy of the source under `repo` (a test's own, so tests do not share state)."""
    copy = tmp_path / f"src-{repo.replace('/', '-')}"
    if not copy.exists():
        shutil.copytree(source, copy)
    return hub.store.publish(repo, copy)


def same_files(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.is_file())
    return names == sorted(p.name for p in b.iterdir() if p.is_file()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def words(done: subprocess.CompletedProcess[str]) -> str:
    """What a command printed, its lines rejoined (a long line wraps at the terminal's width)."""
    return " ".join((done.stdout + done.stderr).split())


def resolves(hub: StandInHub) -> list[dict[str, object]]:
    return [r for r in hub.store.requests() if "/resolve/" in str(r["path"]) or
            str(r["path"]).startswith("/api/models/")]


def test_fetch_then_a_no_op_that_asks_no_hub(hub: StandInHub, source: Path, venv: Path,
                                              tmp_path: Path) -> None:
    commit = publish(hub, source, "orch/fresh", tmp_path)
    target = tmp_path / "model"
    plan = write_plan(tmp_path, venv, {"repo": "orch/fresh", "dir": str(target),
                                       "endpoint": hub.url})
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert f"orch/fresh@{commit[:12]}: 6 of 6 files (6 missing)" in words(applied)
    assert "fetched 30.4 MB" in words(applied)  # the model stage's last word
    assert same_files(target, tmp_path / "src-orch-fresh")
    record = json.loads((last_run(tmp_path) / "hosts/localhost/model.json").read_text())
    assert (record["repo"], record["revision"], record["commit"]) == ("orch/fresh", "main", commit)
    shard = next(f for f in record["files"] if f["path"] == "extra.safetensors")
    assert shard["size"] == 24 * MIB and len(shard["sha256"]) == 64
    events = (last_run(tmp_path) / "events.jsonl").read_text().splitlines()
    assert any('"stage": "model"' in e and "fetched" in e for e in events)
    # A branch is resolved again (the hub is asked, nothing is fetched) ...
    hub.store.clear_requests()
    again = orch("plan", plan, "--detailed-exitcode", cwd=tmp_path)
    assert again.returncode == 0, again.stdout
    assert f"revision main of orch/fresh is commit {commit}" in words(again)
    assert not [r for r in resolves(hub) if "/resolve/" in str(r["path"])]
    # ... a pinned commit is not: a converged host is read with a stat per file.
    hub.store.clear_requests()
    pinned = orch("plan", plan, "--detailed-exitcode", "--set", f"model.revision={commit}",
                  cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stdout
    assert resolves(hub) == []


def test_a_no_op_costs_no_more_round_trips(hub: StandInHub, source: Path, venv: Path,
                                           tmp_path: Path) -> None:
    from orchestrator.apply.compile import compile_plan
    from orchestrator.apply.converge import HostJob, converge_host
    from orchestrator.plan.loader import load_plan
    from orchestrator.transport.local import LocalTransport

    commit = publish(hub, source, "orch/trips", tmp_path)
    plan = write_plan(tmp_path, venv, {"repo": "orch/trips", "revision": commit,
                                       "dir": str(tmp_path / "model"), "endpoint": hub.url})
    assert orch("apply", plan, cwd=tmp_path, timeout=600).returncode == 0
    trips = {}
    for with_model in (True, False):
        sets = [] if with_model else ["model=null"]
        steps = compile_plan(load_plan(plan, sets=sets), {}, ["localhost"]).steps["localhost"]
        transport = LocalTransport("localhost")
        outcome = converge_host(transport, HostJob("localhost", steps), check=True,
                                emit=lambda event: None)
        assert not outcome.failed and all(s.status == "ok" for s in outcome.steps)
        trips[with_model] = transport.round_trips
    assert trips[True] == trips[False] == 1


def test_an_interrupted_download_is_resumed_by_the_next_apply(
        hub: StandInHub, source: Path, venv: Path, tmp_path: Path) -> None:
    commit = publish(hub, source, "orch/partial", tmp_path)
    shard = hub.store.files("orch/partial")["extra.safetensors"]
    target = tmp_path / "model"
    plan = write_plan(tmp_path, venv, {"repo": "orch/partial", "dir": str(target),
                                       "endpoint": hub.url})
    assert orch("apply", plan, "--set", "model=null", cwd=tmp_path, timeout=600).returncode == 0
    partial = target / f".cache/orch/partial/extra.safetensors.{shard.sha256}.incomplete"
    hub.store.pace(6 * MIB)  # a slow link: the 24 MiB shard takes 4 s
    try:
        env = {**os.environ, "ORCH_E2E_SECRET": SECRET}
        running = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "apply", str(plan)],
                                   cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while (not partial.exists() or partial.stat().st_size < 10 * MIB) and \
                time.monotonic() < deadline and running.poll() is None:
            time.sleep(0.05)
        running.send_signal(signal.SIGINT)  # Ctrl-C mid-download
        said, _ = running.communicate(timeout=60)
        assert running.returncode != 0, said
    finally:
        hub.store.pace(None)
    kept = partial.stat().st_size
    assert kept >= 10 * MIB, said
    planned = orch("plan", plan, cwd=tmp_path)
    assert f"(resuming {kept / 1e6:.1f} MB already on disk)" in words(planned)
    hub.store.cut_download("orch/partial", "model.safetensors", 3 * MIB)  # and a cut link now
    hub.store.clear_requests()
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert same_files(target, tmp_path / "src-orch-partial")
    gets = [(r["range"], r.get("cut")) for r in hub.store.requests()
            if r["method"] == "GET" and r["origin"] == "cdn"]
    assert (f"bytes={kept}-", None) in gets  # the shard went on from where it stopped
    assert any(cut for _, cut in gets)  # the cut one was cut, and fetched again in the apply
    assert f"orch/partial@{commit[:12]}" in words(applied)
    assert not partial.exists()


def test_a_corrupted_shard_is_fetched_again(hub: StandInHub, source: Path, venv: Path,
                                            tmp_path: Path) -> None:
    publish(hub, source, "orch/corrupt", tmp_path)
    target = tmp_path / "model"
    plan = write_plan(tmp_path, venv, {"repo": "orch/corrupt", "dir": str(target),
                                       "endpoint": hub.url})
    assert orch("apply", plan, cwd=tmp_path, timeout=600).returncode == 0
    with (target / "extra.safetensors").open("r+b") as handle:  # same size, other bytes
        handle.seek(5 * MIB)
        handle.write(b"bit rot!")
    planned = orch("plan", plan, cwd=tmp_path)
    assert "1 of 6 files (1 changed or never verified: hashed first)" in words(planned)
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "extra.safetensors: sha256 mismatch: fetching it again" in words(applied)
    assert same_files(target, tmp_path / "src-orch-corrupt")
    assert orch("plan", plan, "--detailed-exitcode", cwd=tmp_path).returncode == 0


def test_a_disk_too_small_stops_before_any_download(hub: StandInHub, source: Path, venv: Path,
                                                    tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small", "8m") as mount:
        publish(hub, source, "orch/space", tmp_path)
        plan = write_plan(tmp_path, venv, {"repo": "orch/space", "dir": str(mount / "m"),
                                           "endpoint": hub.url})
        hub.store.clear_requests()
        applied = orch("apply", plan, cwd=tmp_path, timeout=600)
        assert applied.returncode != 0
        said = words(applied)
        assert f"not enough disk space for the model: {mount} has 8.4 MB free, the download " \
               "needs 30.4 MB" in " ".join(said.split()), said
        assert "Traceback" not in said
        assert not [r for r in hub.store.requests() if "/resolve/" in str(r["path"])]
        assert not any(mount.iterdir())


def test_a_moved_branch_shows_in_plan_and_locked_keeps_the_old_commit(
        hub: StandInHub, source: Path, venv: Path, tmp_path: Path) -> None:
    old = publish(hub, source, "orch/moved", tmp_path)
    target = tmp_path / "model"
    plan = write_plan(tmp_path, venv, {"repo": "orch/moved", "dir": str(target),
                                       "endpoint": hub.url})
    assert orch("apply", plan, cwd=tmp_path, timeout=600).returncode == 0
    first = last_run(tmp_path)
    newer = tmp_path / "src-orch-moved"
    (newer / "config.json").write_text((newer / "config.json").read_text() + "\n\n")
    new = hub.store.publish("orch/moved", newer)
    assert new != old
    planned = orch("plan", plan, cwd=tmp_path)
    assert f"revision main of orch/moved is commit {new}" in words(planned)
    assert f"orch/moved@{new[:12]}: 1 of 6 files (1 of the wrong size)" in words(planned)
    locked = orch("apply", "--locked", first, cwd=tmp_path, timeout=600)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert json.loads((last_run(tmp_path) / "hosts/localhost/model.json").read_text())[
        "commit"] == old
    assert (target / "config.json").read_text().endswith("}")  # the old file, not the new
    assert orch("apply", plan, cwd=tmp_path, timeout=600).returncode == 0
    diffed = orch("diff", first, last_run(tmp_path), cwd=tmp_path)
    assert f"orch/moved@{old[:12]}" in words(diffed) and f"orch/moved@{new[:12]}" in words(diffed)


def test_a_private_repository_needs_a_token_that_is_never_shown(
        hub: StandInHub, source: Path, venv: Path, tmp_path: Path) -> None:
    publish(hub, source, "orch/private", tmp_path)
    hub.store.private("orch/private", SECRET)
    target = tmp_path / "model"
    bare = write_plan(tmp_path, venv, {"repo": "orch/private", "dir": str(target),
                                       "endpoint": hub.url})
    refused = orch("apply", bare, cwd=tmp_path, timeout=600)
    said = words(refused)
    assert refused.returncode != 0 and "Traceback" not in said
    assert f"orch/private@main: the hub at {hub.url}: RepositoryNotFoundError" in said, said
    assert "401" in said
    assert "set model.token: ${env:HF_TOKEN}" in said
    plan = write_plan(tmp_path, venv, {"repo": "orch/private", "dir": str(target),
                                       "endpoint": hub.url, "token": "${env:ORCH_E2E_SECRET}"})
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert same_files(target, tmp_path / "src-orch-private")
    assert SECRET not in words(applied) + applied.stderr + said
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert all(SECRET.encode() not in p.read_bytes() for p in target.rglob("*") if p.is_file())


def test_an_unreachable_hub_is_retried_then_said(venv: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    plan = write_plan(tmp_path, venv, {"repo": "orch/nowhere", "dir": str(tmp_path / "m"),
                                       "endpoint": url})
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    said = words(applied)
    assert applied.returncode != 0 and "Traceback" not in said
    assert f"orch/nowhere@main: the hub at {url} after 3 attempts: ConnectError" in said, said
    assert "check model.endpoint / HF_ENDPOINT and the host's network" in said


def test_into_the_cache_as_the_client_lays_it_out(hub: StandInHub, source: Path, venv: Path,
                                                 tmp_path: Path) -> None:
    """The cache layout orch writes (blobs, snapshot links, refs) is what the client itself
    reads offline, as a server with HF_HUB_OFFLINE=1 does; a moved branch fetches only the
    file that changed (the unchanged shard's blob is linked again)."""
    from huggingface_hub import snapshot_download

    old = publish(hub, source, "orch/cached", tmp_path)
    cache = tmp_path / "hf-cache"
    plan = write_plan(tmp_path, venv, {"repo": "orch/cached", "cache": str(cache),
                                       "endpoint": hub.url})
    applied = orch("apply", plan, cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    found = snapshot_download("orch/cached", revision="main", cache_dir=cache,
                              local_files_only=True)
    assert Path(found).name == old and same_files(Path(found), tmp_path / "src-orch-cached")
    newer = tmp_path / "src-orch-cached"
    (newer / "config.json").write_text((newer / "config.json").read_text() + "\n")
    new = hub.store.publish("orch/cached", newer)
    hub.store.clear_requests()
    assert orch("apply", plan, cwd=tmp_path, timeout=600).returncode == 0
    gets = [(r["origin"], str(r["path"])) for r in hub.store.requests() if r["method"] == "GET"
            and (r["origin"] == "cdn" or "/resolve/" in str(r["path"]))]
    assert gets == [("hub", f"/orch/cached/resolve/{new}/config.json")], gets
    found = snapshot_download("orch/cached", revision="main", cache_dir=cache,
                              local_files_only=True)
    assert Path(found).name == new and same_files(Path(found), newer)
