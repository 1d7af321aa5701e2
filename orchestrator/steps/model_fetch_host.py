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

Nothing the hub said is taken on the controller's word alone: the program carries the checks
of facts/model_trust.py and runs them before any stat, removal or write (names, commit,
sizes, the folders' owners and links); a download stops at its listed size and when the free
space falls below the margin kept; an ETag that is not a hash is not a blob's name.
"""

from orchestrator.facts.program import host_side

_BODY = r"""
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
partial_dir, base, margin = places["partial"], places["base"], request.get("margin") or 0
def checked():
    # The controller checked the listing; the host checks it again before any stat, remove
    # or write: a name, a commit and a size become paths and byte counts here.
    problem = model_commit_problem(request["commit"]) or model_files_problem(files)
    if problem is not None:
        return "the hub's listing: " + problem
    into = "" if places["kind"] == "dir" else "snapshots/" + request["commit"] + "/"
    inside = [model_relative(base, partial_dir), model_relative(base, os.path.dirname(request["record"]))]
    inside += ["blobs", "refs"] if places["kind"] == "cache" else []
    return model_folders_problem(base, inside + [into + os.path.dirname(f["path"]) for f in files])
def digest(path, entry):
    if not model_inside(base, path):  # a link out of the folder, a FIFO: never read
        return False
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
    # The file, or the link that stands there: never what a link leads to, but for the
    # cache's own blob (in its blobs folder) that a snapshot links to.
    path = files_dir + "/" + entry["path"]
    real = os.path.realpath(path)
    gone = [path]
    if places["kind"] == "cache" and os.path.dirname(real) == os.path.realpath(base + "/blobs"):
        gone.append(real)
    for each in gone:
        try:
            os.remove(each)
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
    model_make_dirs(base, os.path.dirname(target))
    if places["kind"] == "dir":
        os.replace(part, target)
        return
    blob = base + "/blobs/" + etag
    model_make_dirs(base, base + "/blobs")
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
    model_make_dirs(base, os.path.dirname(part))
    url = hf_hub_url(request["repo"], entry["path"], revision=request["commit"])
    meta = get_hf_file_metadata(url, token=token)
    if getattr(meta, "xet_file_data", None) is not None and xet_available():
        if not model_is_hex((meta.etag or "").strip('"'), 40, 64):
            raise ValueError("%s: the hub's ETag %s is not a hash" % (entry["path"], model_shown(meta.etag)))
        # Xet storage and the venv has hf_xet: the client's own download (its chunk cache
        # is what resumes there), into the same place; then the same hash check.
        hf_hub_download(request["repo"], entry["path"], revision=request["commit"], token=token,
                        **({"local_dir": places["base"]} if places["kind"] == "dir"
                           else {"cache_dir": places["cache"]}))
        return digest(files_dir + "/" + entry["path"], entry) or bool(drop(entry))
    headers = build_hf_headers(token=token)
    if urlsplit(meta.location).netloc != urlsplit(url).netloc:
        headers.pop("authorization", None)  # a CDN's signed address: the token stays home
    with os.fdopen(model_open_new(part, append=True), "ab") as handle:
        if handle.tell() > entry["size"]:  # longer than the file: not a part of it
            handle.truncate(0)
            handle.seek(0)
        capped = Capped(handle, entry, part)
        try:
            http_get(meta.location, capped, resume_size=handle.tell(), headers=headers,
                     expected_size=entry["size"])
        except Overrun:
            os.remove(part)  # what came past the listed size is not the file
            raise
    if not digest(part, entry):
        os.remove(part)
        return False
    etag = (meta.etag or "").strip('"')  # a path in the cache: a hash, or the listed one
    place(entry, part, etag if model_is_hex(etag, 40, 64) else entry.get("sha256") or entry["blob"])
    return True
class Overrun(ValueError):
    pass
class Capped:
    # The file http_get writes to: never past the listed size (an endless body must not fill
    # the disk), and never below the free space kept (another writer may be filling it).
    def __init__(self, handle, entry, part):
        self.handle, self.entry, self.part = handle, entry, part
    def write(self, chunk):
        if self.handle.tell() + len(chunk) > self.entry["size"]:
            raise Overrun("%s: the hub sent more than its listed size of %d bytes: stopped" % (
                self.entry["path"], self.entry["size"]))
        space = os.fstatvfs(self.handle.fileno())
        free = space.f_bavail * space.f_frsize
        if free - len(chunk) < margin:
            raise OSError(28, "%s has %d bytes free, below the %d kept free: the download "
                              "stopped" % (os.path.dirname(self.part), free, margin))
        return self.handle.write(chunk)
    def __getattr__(self, name):
        return getattr(self.handle, name)
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
refused = checked()
if refused is not None:
    say(event="error", kind="Refused", message=refused)
    sys.exit(0)
verified = set(f["path"] for f in files if f["state"] == "ok")
for entry in files:
    if entry["state"] in ("unverified", "size", "link"):
        path = files_dir + "/" + entry["path"]
        if entry["state"] == "unverified" and digest(path, entry):
            verified.add(entry["path"])
            continue
        why = "size %d, the hub's is %d" % (size_of(path), entry["size"]) if entry["state"] == "size" \
            else ("sha256 mismatch" if entry.get("sha256") else "git blob id mismatch")
        if entry["state"] == "link" or not model_inside(base, path) and os.path.lexists(path):
            why = "a link out of the model's folder, or not a file: replaced"
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
    ref = base + "/refs/" + request["revision"]  # what an offline server resolves
    model_make_dirs(base, os.path.dirname(ref))
    model_write_text(ref, request["commit"])
model_make_dirs(base, os.path.dirname(request["record"]))
model_write_text(request["record"], json.dumps(record))
say(event="done", done=on_disk() - start, total=total - start)
"""

# The checks of facts/model_trust.py travel with the program (one home for them).
PROGRAM = "\n".join([
    "from __future__ import annotations",
    "import contextlib, hashlib, json, os, stat, sys, threading, time",
    (host_side("model_trust") or ({}, ""))[1], _BODY])
