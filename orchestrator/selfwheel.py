"""A wheel of the running orch, built from its own installed files.

`engine: sim` runs `orch sim serve` on the host, so the host's venv needs this very orch.
The wheel is built from the package directory the controller imports (editable checkout or
installed wheel alike), byte-for-byte deterministic (sorted entries, fixed timestamps), so
its sha256 names the build: the host re-installs only when the digest changes. The simulator
uses only the standard library, so it installs with `--no-deps` and needs no index.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from functools import cache
from pathlib import Path

import orchestrator

_EPOCH = (2020, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__"}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return f"sha256={digest}"


def _package_files() -> list[tuple[str, bytes]]:
    root = Path(orchestrator.__file__).resolve().parent
    files: list[tuple[str, bytes]] = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or _SKIP_DIRS & set(path.parts) or path.suffix in {".pyc", ".pyo"}:
            continue
        files.append((f"orchestrator/{path.relative_to(root).as_posix()}", path.read_bytes()))
    return files


@cache
def self_wheel() -> tuple[str, bytes]:
    """(file name, bytes) of a wheel holding this orch."""
    version = orchestrator.__version__
    dist_info = f"orch-{version}.dist-info"
    files = _package_files()
    files.append((f"{dist_info}/METADATA",
                  f"Metadata-Version: 2.1\nName: orch\nVersion: {version}\n".encode()))
    files.append((f"{dist_info}/WHEEL",
                  b"Wheel-Version: 1.0\nGenerator: orch\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    files.append((f"{dist_info}/entry_points.txt",
                  b"[console_scripts]\norch = orchestrator.cli:main\n"))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    files.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return f"orch-{version}-py3-none-any.whl", buffer.getvalue()


def self_wheel_digest() -> str:
    return hashlib.sha256(self_wheel()[1]).hexdigest()
