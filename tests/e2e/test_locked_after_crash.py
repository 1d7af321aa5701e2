"""A reproducible redeploy after a host crash: a simulated plan applied over a real sshd
(small real wheels, a config file, the simulator as the server), then the host loses its
venv and its config file and the server is killed; `orch apply --locked RUN` brings back
the frozen package set, the same config file and the same server, and `orch compare` of the
two runs finds nothing in the environment that differs."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures import quick_venv
from fixtures.orchcli import alive, last_run, orch, write_inventory
from fixtures.ports import free_port
from fixtures.sshd import SshServer
from fixtures.wheels import make_wheel

pytestmark = pytest.mark.slow
SAME = ("backend", "launch_spec", "environment", "packages", "config_files")


def _freeze(run: Path) -> list[str]:
    """The run's frozen set, but orch itself (built from the controller's tree)."""
    lines = (run / "hosts" / "h1" / "freeze.txt").read_text().splitlines()
    return [line for line in lines if not line.startswith("orch==")]


def test_a_locked_redeploy_after_a_host_crash_restores_packages_files_and_server(
    tmp_path: Path, sshd: SshServer,
) -> None:
    wheels = tmp_path / "wheels"
    for name, version in [("orchtest-alpha", "1.0.0"), ("orchtest-alpha", "2.0.0"),
                          ("orchtest-beta", "1.0.0")]:
        make_wheel(wheels, name, version)
    inventory = write_inventory(tmp_path / "inventory.yaml", sshd.inventory(1))
    venv, conf = tmp_path / "host" / "venv", tmp_path / "host" / "etc" / "serve.conf"
    name, port = f"crash-{tmp_path.name[-8:]}", free_port()
    plan: dict[str, Any] = {
        "name": "crash", "hosts": "all",
        "python": {"venv": str(venv), "interpreter": quick_venv.interpreter(), "installer": "pip"},
        "install": {"packages": ["orchtest-alpha==2.0.0", "orchtest-beta==1.0.0"],
                    "find_links": [str(wheels)], "no_index": True},
        "files": [{"path": str(conf), "content": "max_batch=${vars.batch}\n", "mode": "0640"}],
        "vars": {"batch": 8},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": port,
                    "backend": "process", "name": name,
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.01,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 2], "requests_per_level": 2, "warmup": 0, "max_tokens": 16},
    }
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(plan))
    state = venv / ".orch" / "service" / name
    try:
        first = orch("apply", plan_file, "-i", inventory, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        old = last_run(tmp_path)
        spec_before = json.loads((state / "spec.json").read_text())
        conf_before = conf.read_bytes(), conf.stat().st_mode & 0o777
        pid = int((state / "pid").read_text().split()[0])

        # The crash: the server dies, the venv (with orch's service state) and the file are lost.
        os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(venv)
        conf.unlink()
        # Later the plan file moves on (another pin): the locked redeploy uses the run's own.
        plan["install"]["packages"][0] = "orchtest-alpha==1.0.0"
        plan_file.write_text(yaml.safe_dump(plan))

        locked = orch("apply", "--locked", old, "-i", inventory, cwd=tmp_path)
        said = locked.stdout + locked.stderr
        assert locked.returncode == 0, said
        new = last_run(tmp_path)
        assert new != old
        assert json.loads((new / "meta.json").read_text())["locked_from"] == str(old)
        assert _freeze(new) == _freeze(old) and "orchtest-alpha==2.0.0" in _freeze(new)
        assert (conf.read_bytes(), conf.stat().st_mode & 0o777) == conf_before
        spec_after = json.loads((state / "spec.json").read_text())
        assert {k: spec_after["fingerprint"][k] for k in SAME} == \
            {k: spec_before["fingerprint"][k] for k in SAME}
        assert spec_after["argv"] == spec_before["argv"]
        new_pid = int((state / "pid").read_text().split()[0])
        assert new_pid != pid and alive(new_pid)
        summary = json.loads(next((new / "hosts" / "h1" / "bench").rglob("summary.json")).read_text())
        assert [row["level"] for row in summary["levels"]] == ["c1", "c2"]

        compared = orch("compare", old, new, cwd=tmp_path)
        shown = " ".join((compared.stdout + compared.stderr).split())
        assert compared.returncode == 0, shown
        assert old.name.split("-")[0] in shown and new.name.split("-")[0] in shown
        # Same host, same kernel and OS, the same frozen packages: nothing to flag.
        for flag in ("the environment is not the same", "another build serves",
                     "other kernels served"):
            assert flag not in shown, shown
    finally:
        orch("stop", plan_file, "-i", inventory, cwd=tmp_path)
