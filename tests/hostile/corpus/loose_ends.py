"""The corpus's fourth round: loose ends of the earlier rounds. A value of the wrong type
that pydantic used to coerce (`port: true` is port 1, `'yes'` is true), sizes past any sane
use (a duration of 11 billion years, a million requests in flight), YAML that is not text
(`!!binary`, a NUL in a comment), an empty `--limit`, a listen address that is no address,
a run folder without its meta.json, `schema -o` at a device, a jump host that names itself."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hostile.corpus import GOOD, Case, section

_SERVICE = "name: x\npython: {venv: /opt/v}\nservice: {model: m, %s}\n"


def _no_meta(tmp: Path) -> None:
    run = tmp / "runs" / "x" / "20260101T000000Z-00000000"
    (run / "hosts").mkdir(parents=True)
    (run / "plan.yaml").write_text(GOOD)


def _device(tmp: Path) -> None:
    """A character device like /dev/full (a FIFO where mknod is not allowed): never the real
    /dev/full, which a failing case would replace for the whole machine."""
    try:
        os.mknod(tmp / "full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        os.mkfifo(tmp / "full")


def _still_special(tmp: Path) -> str | None:
    mode = os.lstat(tmp / "full").st_mode
    return None if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) else "replaced the device by a file"


CASES = [
    *section("values of the wrong type",
        Case("a bool for the service port", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _SERVICE % "port: true"},
             at=("p.yaml:3:27",), says=("service.port: expected an integer, got true",)),
        Case("a string for a bool", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nbench: {ignore_eos: 'yes'}\n"},
             at=("p.yaml:2:21",), says=("expected true or false, got the string 'yes'",)),
        Case("a bool for an inventory port", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\n",
                    "i.yaml": "hosts: {a: {address: 127.0.0.1, port: true}}\n"},
             at=("i.yaml:1:39",), says=("hosts.a.port: expected an integer", "got true")),
        Case("a !!binary name", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: !!binary aGVsbG8=\n"},
             at=("p.yaml:1:7",), says=("a !!binary value cannot stand",)),
        Case("a !!binary value by --set", ["validate", "{tmp}/p.yaml", "--set", "name=!!binary eA=="],
             files={"p.yaml": GOOD},
             at=("--set name=!!binary eA==",), says=("a !!binary value cannot stand",)),
        Case("a listen address that is no address", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": _SERVICE % "host: 'a b;c'"},
             at=("p.yaml:3:27",), says=("service.host: expected an IP address", "'a b;c'")),
    ),
    *section("sizes past any use",
        Case("a duration of 11 billion years", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nbench: {duration: 99999999999999h}\n"},
             at=("p.yaml:2:19",), says=("a duration is at most 30 days",)),
        Case("a million requests in flight", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nbench: {concurrency: [1, 1000000]}\n"},
             at=("p.yaml:2:26",), says=("bench.concurrency.1", "at most 65,536")),
        Case("a concurrency written 1e6", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nbench: {concurrency: [1, 1e6]}\n"},
             at=("p.yaml:2:26",), says=("a whole number", "'1e6'")),
        Case("bench --concurrency of a million", ["bench", "--url", "http://127.0.0.1:1",
                                                  "--concurrency", "1,1000000"],
             code=64, at=("--concurrency",), says=("at most 65,536",)),
    ),
    *section("text that is not text",
        Case("a NUL in a comment", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\n# a \0 comment\n"},
             at=("p.yaml:2:5",), says=("a NUL byte cannot stand anywhere",)),
        Case("an empty --limit", ["plan", "{tmp}/p.yaml", "--limit", ""], files={"p.yaml": GOOD},
             code=64, at=("--limit",), says=("got ''",)),
    ),
    *section("what orch lists, writes and reads around a plan",
        Case("a run folder without meta.json", ["runs"], prepare=_no_meta, code=0,
             says=("20260101T000000Z-00000000", "no meta.json")),
        Case("schema -o a device", ["schema", "-o", "{tmp}/full"], prepare=_device,
             after=_still_special, at=("full",), says=("not a regular file",)),
        Case("an INI jump host naming itself", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.ini"],
             files={"p.yaml": "name: ok\nhosts: a\n",
                    "i.ini": "[all]\na ansible_host=127.0.0.1 ansible_ssh_common_args='-J a'\n"},
             at=("i.ini:2:50",), says=("jump hosts form a loop: a -> a",)),
    ),
]
