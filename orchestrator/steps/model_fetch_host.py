"""The program that fetches a model's files on the host, run by the plan's venv python with
the real `huggingface_hub` client (its metadata request, its resumable `http_get`; never
hand-written HTTP): its first input line is the request (the token travels there, never on a
command line); then it prints one JSON event per line: `progress` (bytes on disk, each
second), `refetch` (a file whose hash is wrong), `retry`, and at the end `done` (the record
orch keeps beside the files) or `error`.

Each file (unless it is on Xet storage and the venv has hf_xet: then the client's own
`hf_hub_download`) is downloaded into orch's partial folder (`<meta>/partial/`) and resumed from there
with a range request by the next attempt or the next apply: `snapshot_download` (2.x) keeps a
partial file only within one process, and a 600 GB download outlives processes. A whole file
is hashed against the hub's sha256 (LFS) or git blob id, then moved into place: the folder,
or the cache's layout (`blobs/<etag>`, `snapshots/<commit>/<path>` linking to it, `refs/`).
Files present but not yet verified by orch are hashed first, and wrong ones removed. The
input closing (the apply ended or died) ends the program at once.
"""

PROGRAM = r"""
import hashlib, json, os, sys, threading, time
request = json.loads(sys.stdin.readline())
def say(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
def watch_input():
    sys.stdin.read()
    os._exit(130)
threading.Thread(target=watch_input, daemon=True).start()
if request.get("endpoint"):
    os.environ["HF_ENDPOINT"] = request["endpoint"]
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
token = request.get("token") or None
def hidden(text):
    # the token masked before the text is cut (a hub may repeat it; half a token is no match)
    return text.replace(token, "***") if token and len(token) >= 4 else text
try:
    from urllib.parse import urlsplit
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers
except ImportError as error:
    say(event="error", kind="ImportError", message="huggingface_hub is not in the venv: %s" % error)
    sys.exit(0)
def xet_available():
    try:
        from huggingface_hub.utils import is_xet_available
    except ImportError:
        return False
    return is_xet_available() and not os.environ.get("HF_HUB_DISABLE_XET")
files_dir, places, files = request["files_dir"], request["places"], request["files"]
partial_dir = places["partial"]
def digest(path, entry):
    if entry.get("sha256"):
        hashed, want = hashlib.sha256(), entry["sha256"]
    elif entry.get("blob"):
        hashed, want = hashlib.sha1(b"blob %d\0" % os.path.getsize(path)), entry["blob"]
    else:
        return True
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hashed.update(chunk)
    return hashed.hexdigest() == want
def drop(entry):
    path = files_dir + "/" + entry["path"]
    for gone in {path, os.path.realpath(path)}:
        try:
            os.remove(gone)
        except OSError:
            pass
def size_of(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
def part_of(entry):
    return "%s/%s.%s.incomplete" % (partial_dir, entry["path"], entry.get("sha256") or entry.get("blob") or "x")
def on_disk():
    return sum(min(size_of(files_dir + "/" + f["path"]) or size_of(part_of(f)), f.get("size") or 0)
               for f in files)
def place(entry, part, etag):
    target = files_dir + "/" + entry["path"]
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if places["kind"] == "dir":
        os.replace(part, target)
        return
    blob = places["base"] + "/blobs/" + etag
    os.makedirs(os.path.dirname(blob), exist_ok=True)
    if part is not None:
        os.replace(part, blob)
    if os.path.lexists(target):
        os.remove(target)
    os.symlink(os.path.relpath(blob, os.path.dirname(target)), target)
def download(entry):
    if places["kind"] == "cache":  # the same content under another commit: link it
        blob = places["base"] + "/blobs/" + (entry.get("sha256") or entry.get("blob") or "-")
        if os.path.isfile(blob) and digest(blob, entry):
            place(entry, None, os.path.basename(blob))
            return True
    part = part_of(entry)
    os.makedirs(os.path.dirname(part), exist_ok=True)
    url = hf_hub_url(request["repo"], entry["path"], revision=request["commit"])
    meta = get_hf_file_metadata(url, token=token)
    if getattr(meta, "xet_file_data", None) is not None and xet_available():
        # Xet storage and the venv has hf_xet: the client's own download (its chunk cache
        # is what resumes there), into the same place; then the same hash check.
        hf_hub_download(request["repo"], entry["path"], revision=request["commit"], token=token,
                        **({"local_dir": places["base"]} if places["kind"] == "dir"
                           else {"cache_dir": places["cache"]}))
        return digest(files_dir + "/" + entry["path"], entry) or bool(drop(entry))
    headers = build_hf_headers(token=token)
    if urlsplit(meta.location).netloc != urlsplit(url).netloc:
        headers.pop("authorization", None)  # a CDN's signed address: the token stays home
    with open(part, "ab") as handle:
        http_get(meta.location, handle, resume_size=handle.tell(), headers=headers,
                 expected_size=entry.get("size"))
    if not digest(part, entry):
        os.remove(part)
        return False
    place(entry, part, (meta.etag or "").strip('"') or entry.get("sha256") or entry["blob"])
    return True
def final(error):
    status = getattr(getattr(error, "response", None), "status_code", None)
    return getattr(error, "errno", None) == 28 or status in (401, 403, 404) or \
        isinstance(error, (ValueError, ImportError))
def fetch(entry):
    for attempt in range(4):
        try:
            return download(entry)
        except Exception as error:
            text = str(error)
            if attempt == 3 or final(error):
                raise
            say(event="retry", attempt=attempt + 1, message=hidden(text.splitlines()[0])[:300] if text else repr(error))
            time.sleep(2.0 * (attempt + 1))
verified = set(f["path"] for f in files if f["state"] == "ok")
for entry in files:
    if entry["state"] in ("unverified", "size"):
        path = files_dir + "/" + entry["path"]
        if entry["state"] == "unverified" and digest(path, entry):
            verified.add(entry["path"])
            continue
        why = "size %d, the hub's is %d" % (size_of(path), entry["size"]) if entry["state"] == "size" \
            else ("sha256 mismatch" if entry.get("sha256") else "git blob id mismatch")
        say(event="refetch", path=entry["path"], why=why)
        drop(entry)
total = sum(f.get("size") or 0 for f in files)
start = on_disk()
say(event="progress", done=0, total=total - start, files=len(files) - len(verified))
finished = threading.Event()
def report():
    while not finished.wait(1.0):
        say(event="progress", done=on_disk() - start, total=total - start)
threading.Thread(target=report, daemon=True).start()
try:
    for entry in files:
        if entry["path"] in verified:
            continue
        if not fetch(entry):
            say(event="refetch", path=entry["path"], why="its hash differs after download")
            if not fetch(entry):
                raise ValueError("%s: its hash still differs from the hub's after a second "
                                 "download" % entry["path"])
except Exception as error:
    finished.set()
    lines = [line for line in str(error).splitlines() if line.strip()] or [repr(error)]
    say(event="error", kind=type(error).__name__, message=hidden(" ".join(lines[:3]))[:800],
        space=getattr(error, "errno", None) == 28)
    sys.exit(0)
finished.set()
stamps = {}
for entry in files:
    info = os.stat(files_dir + "/" + entry["path"])
    stamps[entry["path"]] = [info.st_size, info.st_mtime_ns]
record = {"repo": request["repo"], "revision": request["revision"], "commit": request["commit"],
          "files": [{k: f.get(k) for k in ("path", "size", "sha256", "blob")} for f in files],
          "stamps": stamps, "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
if places["kind"] == "cache" and request["revision"] != request["commit"]:
    os.makedirs(places["base"] + "/refs", exist_ok=True)  # what an offline server resolves
    with open(places["base"] + "/refs/" + request["revision"], "w") as handle:
        handle.write(request["commit"])
os.makedirs(os.path.dirname(request["record"]), exist_ok=True)
with open(request["record"] + ".tmp", "w") as handle:
    json.dump(record, handle)
os.replace(request["record"] + ".tmp", request["record"])
say(event="done", done=on_disk() - start, total=total - start)
"""
