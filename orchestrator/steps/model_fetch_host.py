"""The program that fetches a model's files on the host, run by the plan's venv python with
the real `huggingface_hub` client (never hand-written HTTP): its first input line is the
request (the token travels there, never on a command line); then it prints one JSON event
per line: `progress` (bytes on disk, each second), `refetch` (a file whose hash is wrong),
`retry`, and at the end `done` (the record orch keeps beside the files) or `error`.

Before fetching, files present but not yet verified by orch are hashed, and wrong ones
removed so the client fetches them again; a partial download (`*.incomplete`) is resumed by
the client with a range request. After fetching, every file not verified yet is hashed
against the hub's sha256 (LFS) or git blob id; one that is still wrong after a second fetch
fails the change. The input closing (the apply ended or died) ends the program: the next
apply resumes where it stopped.
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
if request.get("token"):
    os.environ["HF_TOKEN"] = request["token"]
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
try:
    from huggingface_hub import hf_hub_download, snapshot_download
except ImportError as error:
    say(event="error", message="huggingface_hub is not in the venv: %s" % error)
    sys.exit(0)
files_dir, places = request["files_dir"], request["places"]
files = request["files"]
target = {"local_dir": places["base"]} if places["kind"] == "dir" else {"cache_dir": places["cache"]}
def digest(path, entry):
    if entry.get("sha256"):
        hashed = hashlib.sha256()
        want = entry["sha256"]
    elif entry.get("blob"):
        hashed = hashlib.sha1(b"blob %d\0" % os.path.getsize(path))
        want = entry["blob"]
    else:
        return True
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hashed.update(chunk)
    return hashed.hexdigest() == want
def drop(entry):
    path = files_dir + "/" + entry["path"]
    real = os.path.realpath(path)
    for gone in {path, real, places["base"] + "/.cache/huggingface/download/" + entry["path"] + ".metadata"}:
        try:
            os.remove(gone)
        except OSError:
            pass
def size_of(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
def on_disk():
    total = sum(min(size_of(files_dir + "/" + f["path"]), f.get("size") or 0) for f in files)
    for root, _dirs, names in os.walk(places["partial"]):
        total += sum(size_of(os.path.join(root, n)) for n in names if n.endswith(".incomplete"))
    return total
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
def fetch():
    for attempt in range(4):
        try:
            return snapshot_download(request["repo"], revision=request["commit"],
                                     allow_patterns=request["allow"] or None,
                                     ignore_patterns=request["ignore"] or None, **target)
        except OSError as error:
            if getattr(error, "errno", None) == 28:
                raise
            if attempt == 3 or "404" in str(error) or "401" in str(error) or "403" in str(error):
                raise
            say(event="retry", attempt=attempt + 1, message=str(error).splitlines()[0][:300])
            time.sleep(2.0 * (attempt + 1))
try:
    fetch()
    for entry in files:
        if entry["path"] in verified:
            continue
        path = files_dir + "/" + entry["path"]
        if not digest(path, entry):
            say(event="refetch", path=entry["path"], why="sha256 mismatch after download")
            drop(entry)
            hf_hub_download(request["repo"], entry["path"], revision=request["commit"],
                            force_download=True, **target)
            if not digest(path, entry):
                raise ValueError("%s: its hash still differs from the hub's after a second "
                                 "download" % entry["path"])
except Exception as error:
    finished.set()
    lines = [line for line in str(error).splitlines() if line.strip()] or [repr(error)]
    say(event="error", kind=type(error).__name__, message=" ".join(lines[:3])[:800],
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
