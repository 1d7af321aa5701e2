"""`orch tune` of a plan on two hosts: trials run side by side, one per host, sharing one
Optuna study. The hosts are network namespaces with an sshd each and a private
/srv/orch-tune (their own venv and server, as separate machines have); the simulator serves
on each, the sweep reaches it through an SSH forward."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from fixtures import quick_venv
from fixtures.netns import NetnsHosts, netns_available
from fixtures.orchcli import orch, write_inventory

pytestmark = pytest.mark.slow

ROOT = "/srv/orch-tune"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsHosts]:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with NetnsHosts(tmp_path_factory.mktemp("tune-hosts"), 2, private=(ROOT,)) as made:
        yield made


def test_two_hosts_run_trials_side_by_side(hosts: NetnsHosts, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", hosts.inventory())
    plan = tmp_path / "tn.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "tnh", "hosts": "all",
        "python": {"venv": f"{ROOT}/venv", "interpreter": quick_venv.interpreter(),
                   "installer": "pip"},
        "service": {"engine": "sim", "model": "m", "host": "127.0.0.1", "port": 8000,
                    "backend": "process", "name": "tnh", "args": {"max-num-seqs": 2},
                    "sim": {"profile": "kimi-k2.5-nvfp4-8x-rtx-pro-6000", "time_scale": 0.05,
                            "startup_time_scale": 0.001}},
        "health": {"startup_timeout": "60s", "poll_interval": "0.2s"},
        "bench": {"concurrency": [1, 8], "requests_per_level": 16, "warmup": 0,
                  "max_tokens": 64, "ignore_eos": True, "via": "ssh"},
        "tune": {"service.args.max-num-seqs": [2, 4, 8, 16]},
    }, sort_keys=False))
    try:
        tuned = orch("tune", plan, "-i", inventory, "--slo", "p99_ttft<=60s", "--trials", "5",
                     cwd=tmp_path, timeout=600)
        out = " ".join((tuned.stdout + tuned.stderr).split())
        assert tuned.returncode == 0, out
        folder = next((tmp_path / "runs" / "tnh").glob("tune-*"))
        record = json.loads((folder / "tune.json").read_text())
        trials = record["trials"]
        assert record["hosts"] == ["n1", "n2"]
        ran = [t for t in trials if t["status"] == "complete"]
        assert len(ran) == 4, trials  # every value once: the space is covered
        assert {t["host"] for t in ran} == {"n1", "n2"}, trials
        spans = []
        for entry in ran:
            meta = json.loads((tmp_path / entry["run"] / "meta.json").read_text())
            assert meta["hosts"] == [entry["host"]]
            spans.append((datetime.fromisoformat(meta["started"]),
                           datetime.fromisoformat(meta["finished"])))
        overlapping = any(a[0] < b[1] and b[0] < a[1]
                          for i, a in enumerate(spans) for b in spans[i + 1:])
        assert overlapping, spans  # two trials ran at once
        assert (folder / "trial-2" / "apply.log").is_file()  # each apply's output to its log
        table = out.split("Tune tnh:")[-1]
        assert " n1 " in table and " n2 " in table
    finally:
        orch("stop", plan, "-i", inventory, cwd=tmp_path)
