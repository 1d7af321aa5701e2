"""The fact program kept compiled on the host: compiling its ~66 KB costs a host ~10 ms of
CPU on every probe (on the critical path of a one-host apply, and 64 hosts' worth of CPU
when they share a machine), so each host compiles it once per orch build.

The controller sends the program, then a comment line `# orch: call DIGEST` (DIGEST: the
program's SHA-256, computed on the controller), then the call. The host's `RUNNER` loads
the code from `~/.orch/cache/probe-DIGEST-TAG.bin` (TAG: its Python's cache tag, since the
marshal format is the interpreter's), or compiles it and keeps it there (atomically: a
temporary file, then a rename; the older programs removed). Anything wrong with the cache
(unwritable home, a damaged file) only costs the compile. Without the comment line (a
program fed by hand) the whole input is compiled, as before. The input stays a plain
Python program: `python3 -S -` runs it unchanged.
"""

from __future__ import annotations

import hashlib
from functools import cache

CALL_MARK = "\n# orch: call "

# Host side: stdlib only, Python 3.8. Defines _orch_run(source: bytes, namespace: dict).
RUNNER = r'''
def _orch_run(source, namespace):
    head, mark, rest = source.partition(b"\n# orch: call ")
    digest, _, call = rest.partition(b"\n")
    if not mark or not digest.isalnum() or len(digest) > 64:
        exec(compile(source, "<orch>", "exec"), namespace)
        return
    import marshal, os, sys
    folder = os.path.expanduser("~/.orch/cache")
    name = "probe-%s-%s.bin" % (digest.decode(), sys.implementation.cache_tag)
    try:
        with open(os.path.join(folder, name), "rb") as kept:
            code = marshal.load(kept)
    except Exception:
        code = compile(head, "<orch>", "exec")
        try:
            os.makedirs(folder, 0o700, exist_ok=True)
            temporary = os.path.join(folder, ".%s.%d.tmp" % (name, os.getpid()))
            with open(temporary, "wb") as kept:
                marshal.dump(code, kept)
            os.replace(temporary, os.path.join(folder, name))
            for other in os.listdir(folder):
                if other.startswith("probe-") and other.endswith(".bin") and other != name:
                    os.unlink(os.path.join(folder, other))
        except OSError:
            pass
    exec(code, namespace)
    exec(compile(call, "<orch>", "exec"), namespace)
'''


@cache
def digest(program: str) -> str:
    """The key the host keeps `program`'s compiled code under."""
    return hashlib.sha256(program.encode()).hexdigest()[:40]
