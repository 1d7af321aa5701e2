"""The stand-in Hugging Face hub (`orch sim hub`, orchestrator/sim/hub*.py) through the real
huggingface_hub client of the dev venv, over loopback: model info, the tree, snapshots into a
local dir and into the cache, a moved branch, a cut download resumed, a private repository,
the client's own not-found errors, the byte ranges on the wire, and the command line."""

from __future__ import annotations

import filecmp
import hashlib
import http.client
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from fixtures.vllm_cpu import make_model
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from orchestrator.sim.hub import StandInHub, running_hub
from orchestrator.sim.hub_store import HubStore, HubStoreError

ROOT = Path(__file__).resolve().parents[2]
REPO = "tiny/model"
BIG = 1536 * 1024  # over 1 MiB: LFS by size

huggingface_hub.utils.disable_progress_bars()


def _small_model(folder: Path, weights: bytes = b"\x01" * 4096) -> Path:
    """A few files: plain ones, one in a sub-folder, an LFS one by name and one by size."""
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "tiny"}\n')
    (folder / "sub" / "notes.txt").write_text("notes\n")
    (folder / "weights.safetensors").write_bytes(weights)
    (folder / "big.dat").write_bytes(bytes(range(256)) * (BIG // 256))
    (folder / ".git").mkdir(exist_ok=True)
    (folder / ".git" / "HEAD").write_text("not published\n")
    return folder


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[StandInHub]:
    with running_hub(tmp_path / "hub", tree_page_size=2) as served:
        yield served


def _same_files(expected: Path, got: Path) -> None:
    names = sorted(p.relative_to(expected).as_posix() for p in expected.rglob("*")
                   if p.is_file() and ".git" not in p.parts)
    assert names, expected
    for name in names:
        assert filecmp.cmp(expected / name, got / name, shallow=False), name


def test_model_info_and_tree(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    commit = hub.store.publish(REPO, folder)
    api = HfApi(endpoint=hub.url, token=False)
    info = api.model_info(REPO, revision="main", files_metadata=True)
    assert info.sha == commit and info.id == REPO and info.private is False
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert sorted(siblings) == ["big.dat", "config.json", "sub/notes.txt", "weights.safetensors"]
    config = (folder / "config.json").read_bytes()
    assert siblings["config.json"].size == len(config) and siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
    for name in ("big.dat", "weights.safetensors"):
        lfs = siblings[name].lfs
        assert lfs is not None and lfs.sha256 == hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert lfs.size == siblings[name].size == (folder / name).stat().st_size
    assert siblings["big.dat"].size == BIG

    tree = list(api.list_repo_tree(REPO, recursive=True, revision=commit))
    assert {e.path: type(e) for e in tree} == {
        "big.dat": RepoFile, "config.json": RepoFile, "sub": RepoFolder, "sub/notes.txt": RepoFile,
        "weights.safetensors": RepoFile}  # fmt: skip
    files = {e.path: e for e in tree if isinstance(e, RepoFile)}
    assert files["big.dat"].lfs is not None and files["big.dat"].lfs.sha256 == siblings["big.dat"].lfs.sha256
    assert files["config.json"].blob_id == siblings["config.json"].blob_id
    pages = [r for r in hub.store.requests() if "/tree/" in r["path"]]
    assert len(pages) == 3 and "cursor=" in pages[-1]["query"]  # 5 entries, 2 a page: Link followed
    top = [e.path for e in api.list_repo_tree(REPO)]
    assert sorted(top) == ["big.dat", "config.json", "sub", "weights.safetensors"]
    assert [e.path for e in api.list_repo_tree(REPO, path_in_repo="sub")] == ["sub/notes.txt"]


def test_snapshot_download_to_local_dir_and_to_the_cache(hub: StandInHub, tmp_path: Path) -> None:
    folder = make_model(tmp_path / "model")
    commit = hub.store.publish(REPO, folder)
    local = Path(snapshot_download(REPO, endpoint=hub.url, token=False, local_dir=tmp_path / "local"))
    _same_files(folder, local)
    cache = tmp_path / "cache"
    snapshot = Path(snapshot_download(REPO, endpoint=hub.url, token=False, cache_dir=cache))
    _same_files(folder, snapshot)
    assert snapshot == cache / "models--tiny--model" / "snapshots" / commit
    assert (cache / "models--tiny--model" / "refs" / "main").read_text() == commit
    weights = [r for r in hub.store.requests()
               if r["path"].endswith("/model.safetensors") or r["query"] == "filename=model.safetensors"]
    assert {(r["origin"], r["method"], r["status"]) for r in weights} == {
        ("hub", "HEAD", 302), ("cdn", "GET", 200)}  # LFS: redirected to the CDN  # fmt: skip

    hub.store.clear_requests()  # a second snapshot into the same local dir fetches nothing
    snapshot_download(REPO, endpoint=hub.url, token=False, local_dir=tmp_path / "local")
    assert [(r["method"], r["path"]) for r in hub.store.requests()] == [
        ("GET", f"/api/models/{REPO}/revision/main")]  # fmt: skip


def test_hf_hub_download_of_one_file(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    commit = hub.store.publish(REPO, folder)
    config = hf_hub_download(REPO, "config.json", endpoint=hub.url, token=False,
                             cache_dir=tmp_path / "cache")
    assert Path(config).read_bytes() == (folder / "config.json").read_bytes()
    assert f"/snapshots/{commit}/config.json" in config
    nested = hf_hub_download(REPO, "sub/notes.txt", endpoint=hub.url, token=False,
                             local_dir=tmp_path / "local")
    assert Path(nested) == (tmp_path / "local" / "sub" / "notes.txt").resolve()
    assert Path(nested).read_text() == "notes\n"


def test_a_republished_branch_moves_and_the_old_commit_stays(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    old = hub.store.publish(REPO, folder)
    assert hub.store.publish(REPO, folder) == old  # the same content: no new commit
    (folder / "weights.safetensors").write_bytes(b"\x02" * 4096)
    new = hub.store.publish(REPO, folder)
    assert new != old and len(new) == 40
    api = HfApi(endpoint=hub.url, token=False)
    assert api.model_info(REPO).sha == new == hub.store.commit(REPO)
    assert api.model_info(REPO, revision=old).sha == old
    got_old = Path(snapshot_download(REPO, revision=old, endpoint=hub.url, token=False,
                                     cache_dir=tmp_path / "cache"))
    got_new = Path(snapshot_download(REPO, endpoint=hub.url, token=False, cache_dir=tmp_path / "cache"))
    assert (got_old / "weights.safetensors").read_bytes() == b"\x01" * 4096
    assert (got_new / "weights.safetensors").read_bytes() == b"\x02" * 4096
    assert got_old.name == old and got_new.name == new


@pytest.mark.slow
def test_a_cut_download_is_resumed_with_a_range(hub: StandInHub, tmp_path: Path) -> None:
    """huggingface_hub writes what it read in whole DOWNLOAD_CHUNK_SIZE (10 MiB) pieces, so it
    resumes a cut download from the last whole piece (and restarts one cut within the first,
    below)."""
    folder = _small_model(tmp_path / "model")
    chunk = huggingface_hub.constants.DOWNLOAD_CHUNK_SIZE
    (folder / "shard.safetensors").write_bytes(os.urandom(chunk + chunk // 4))
    hub.store.publish(REPO, folder)
    cut = chunk + chunk // 8
    hub.store.cut_download(REPO, "shard.safetensors", cut)
    got = hf_hub_download(REPO, "shard.safetensors", endpoint=hub.url, token=False,
                          local_dir=tmp_path / "local")
    assert Path(got).read_bytes() == (folder / "shard.safetensors").read_bytes()
    gets = [r for r in hub.store.requests() if r["origin"] == "cdn"]
    assert [(r["range"], r["status"], r.get("cut")) for r in gets] == [
        (None, 200, cut), (f"bytes={chunk}-", 206, None)]  # fmt: skip


@pytest.mark.slow
def test_a_download_cut_within_its_first_chunk_restarts(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    hub.store.publish(REPO, folder)
    hub.store.cut_download(REPO, "big.dat", 300_000)
    got = hf_hub_download(REPO, "big.dat", endpoint=hub.url, token=False, cache_dir=tmp_path / "cache")
    assert Path(got).read_bytes() == (folder / "big.dat").read_bytes()
    gets = [r for r in hub.store.requests() if r["origin"] == "cdn"]
    assert [(r["range"], r["status"], r.get("cut")) for r in gets] == [
        (None, 200, 300_000), (None, 200, None)]  # fmt: skip


def test_a_private_repository_needs_its_token(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    hub.store.publish(REPO, folder)
    hub.store.private(REPO, "hf_secret_token")
    assert "hf_secret_token" not in (hub.store.root / "repos" / "tiny--model.json").read_text()
    with pytest.raises(RepositoryNotFoundError) as missing:
        snapshot_download(REPO, endpoint=hub.url, token=False, cache_dir=tmp_path / "cache")
    text = str(missing.value)
    assert "401 Client Error" in text and "Repository Not Found" in text
    assert "make sure you are authenticated" in text
    with pytest.raises(HfHubHTTPError) as wrong:
        hf_hub_download(REPO, "config.json", endpoint=hub.url, token="hf_wrong_token",
                        cache_dir=tmp_path / "cache")
    assert "Invalid credentials in Authorization header" in str(wrong.value)
    assert "hf_wrong_token" not in str(wrong.value)
    hub.store.clear_requests()
    got = snapshot_download(REPO, endpoint=hub.url, token="hf_secret_token", local_dir=tmp_path / "local")
    _same_files(folder, Path(got))
    served = hub.store.requests()
    assert all(r["auth"] for r in served if r["origin"] == "hub")
    cdn = [r for r in served if r["origin"] == "cdn"]
    assert cdn and not any(r["auth"] for r in cdn)  # the token does not leave the hub


def test_unknown_repository_revision_and_file(hub: StandInHub, tmp_path: Path) -> None:
    hub.store.publish(REPO, _small_model(tmp_path / "model"))
    api = HfApi(endpoint=hub.url, token=False)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("tiny/nothing")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("tiny/nothing", "config.json", endpoint=hub.url, token=False,
                        cache_dir=tmp_path / "cache")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="v9")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download(REPO, revision="0" * 40, endpoint=hub.url, token=False,
                          cache_dir=tmp_path / "cache")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.json", endpoint=hub.url, token=False, cache_dir=tmp_path / "cache")
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="nowhere"))


def _get(conn: http.client.HTTPConnection, method: str, path: str,
         headers: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    return response, response.read()


def test_ranges_head_and_keep_alive_on_the_wire(hub: StandInHub, tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    commit = hub.store.publish(REPO, folder)
    data = (folder / "config.json").read_bytes()
    conn = http.client.HTTPConnection(hub.url.removeprefix("http://"), timeout=10)
    path = f"/{REPO}/resolve/main/config.json"
    head, body = _get(conn, "HEAD", path)  # the same connection serves every request below
    assert head.status == 200 and body == b"" and head.getheader("Content-Length") == str(len(data))
    assert head.getheader("X-Repo-Commit") == commit and not head.getheader("X-Xet-Hash")
    response, body = _get(conn, "GET", path, {"Range": "bytes=2-5"})
    assert response.status == 206 and body == data[2:6]
    assert response.getheader("Content-Range") == f"bytes 2-5/{len(data)}"
    response, body = _get(conn, "GET", path, {"Range": "bytes=-3"})
    assert response.status == 206 and body == data[-3:]
    response, body = _get(conn, "GET", path, {"Range": f"bytes={len(data)}-"})
    assert response.status == 416 and response.getheader("Content-Range") == f"bytes */{len(data)}"
    response, body = _get(conn, "GET", f"/{REPO}/resolve/{commit}/big.dat")
    assert response.status == 302 and response.getheader("X-Linked-Size") == str(BIG)
    assert response.getheader("Location", "").startswith(hub.cdn_url + "/lfs/")
    response, body = _get(conn, "HEAD", f"/{REPO}/resolve/main/big.dat", {"Host": "localhost:1"})
    assert response.getheader("Location", "").startswith(f"http://localhost:{hub.cdn_port}/lfs/")
    response, body = _get(conn, "GET", f"/api/models/{REPO}/revision/%C3%A9t%C3%A9")
    assert response.status == 404 and response.getheader("X-Error-Code") == "RevisionNotFound"
    response, body = _get(conn, "GET", f"/api/models/{REPO}/tree/main?cursor=%%%")
    assert response.status == 400
    response, body = _get(conn, "GET", f"/api/models/{REPO}/revision/{commit}?expand=sha")
    assert response.status == 200 and body.startswith(b"{") and b"siblings" not in body
    conn.close()


def test_the_store_refuses_bad_input(tmp_path: Path) -> None:
    store = HubStore(tmp_path / "hub")
    for bad in ("a/b/c", "a--b", "", "-x", "x/.y"):
        with pytest.raises(HubStoreError, match="bad repository id"):
            store.publish(bad, tmp_path)
    with pytest.raises(HubStoreError, match="no such folder"):
        store.publish(REPO, tmp_path / "absent")
    commit = store.publish(REPO, _small_model(tmp_path / "model"))
    again = HubStore(tmp_path / "other").publish(REPO, tmp_path / "model")
    assert commit == again  # the commit is the content's (and the parent's)
    files = store.files(REPO, commit)
    assert ".git/HEAD" not in files and {p for p, f in files.items() if f.lfs} == {
        "big.dat", "weights.safetensors"}  # fmt: skip
    with pytest.raises(HubStoreError, match="no file"):
        store.cut_download(REPO, "absent.bin", 10)


def _orch_hub(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "sim", "hub", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


@pytest.mark.slow
def test_the_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    process = _orch_hub("--port", "0", "--root", str(tmp_path / "hub"), f"{REPO}={folder}")
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        commit = HubStore(tmp_path / "hub").commit(REPO)
        assert line.startswith("stand-in hub on http://127.0.0.1:") and line.endswith(f": {REPO}@{commit}")
        url = line.removeprefix("stand-in hub on ").rsplit(": ", 1)[0]
        got = hf_hub_download(REPO, "big.dat", endpoint=url, token=False, cache_dir=tmp_path / "cache")
        assert Path(got).read_bytes() == (folder / "big.dat").read_bytes()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_the_command_line_refuses_bad_input(tmp_path: Path) -> None:
    folder = _small_model(tmp_path / "model")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = str(taken.getsockname()[1])
    cases = {("a/b/c=" + str(folder),): "bad repository id 'a/b/c'",
             (f"{REPO}={tmp_path / 'absent'}",): "no such folder",
             ("--port", port, f"{REPO}={folder}"): f"cannot listen on 127.0.0.1:{port}: Address already in use"}
    with taken:
        for args, said in cases.items():
            process = _orch_hub(*args)
            out, err = process.communicate(timeout=30)
            assert process.returncode == 2 and out == "", args
            assert err.strip().count("\n") == 0 and said in err and err.startswith("orch sim hub: ")


def test_python_m_orchestrator_sim_hub_takes_the_same_arguments(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrator.sim", "hub", "x/y=" + str(tmp_path / "no")],
                          capture_output=True, text=True, timeout=30, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 2 and "x/y: no such folder" in done.stderr
