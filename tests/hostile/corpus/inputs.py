"""The corpus's first two rounds: files that are not plan files, --set, values that reach
hosts, inventories, run folders, names that become paths, templates, writers inside run
folders, values accepted that should not be."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.corpus import GOOD, RUN, Case, locked_run, section


def _symlink_loop(tmp: Path) -> None:
    (tmp / "loop.yaml").symlink_to("loop.yaml")


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "fifo.yaml")


def _binary(tmp: Path) -> None:
    (tmp / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")


def _huge(tmp: Path) -> None:
    with open(tmp / "huge.yaml", "w") as handle:
        handle.write("name: x\n# " + "x" * (9 * 1024 * 1024) + "\n")


def _unwritable_runs(tmp: Path) -> None:
    (tmp / "runs").write_text("a file, not a folder")


def _doubling_vars(tmp: Path) -> None:
    lines = ["name: x", "vars:", "  v0: aaaaaaaaaaaaaaaa"]
    lines += [f'  v{i}: "${{vars.v{i - 1}}}${{vars.v{i - 1}}}"' for i in range(1, 40)]
    (tmp / "p.yaml").write_text("\n".join([*lines, 'description: "${vars.v39}"', ""]))


def _chained_vars(tmp: Path) -> None:
    lines = ["name: x", "vars:"]
    lines += [f'  v{i}: "${{vars.v{i - 1}}}"' for i in range(1999, 0, -1)]
    (tmp / "p.yaml").write_text("\n".join([*lines, "  v0: a", 'description: "${vars.v1999}"',
                                           ""]))


def _fifo_meta(tmp: Path) -> None:
    run = tmp / "runs" / "x" / "20260101T000000Z-00000000"
    run.mkdir(parents=True)
    os.mkfifo(run / "meta.json")


def _fifo_template(tmp: Path) -> None:
    os.mkfifo(tmp / "t.j2")


def _escape_template(tmp: Path) -> None:
    (tmp / "sub").mkdir()
    (tmp / "sub" / "p.yaml").write_text(
        "name: x\nfiles: [{path: /tmp/orch-corpus-t, template: ../secret.txt}]\n")
    (tmp / "secret.txt").write_text("not for the diff\n")


def _symlink_template(tmp: Path) -> None:
    (tmp / "t.j2").symlink_to("/etc/hostname")


DEEP_SET = "vars.x=" + "[" * 60000 + "]" * 60000


# A plan that hands an inventory variable to a command's environment.
_HOST_VAR_PLAN = ("name: x\nhosts: localhost\ncommands:\n  - name: c\n    run: [sh, -c, 'echo $T']\n"
                  "    env: {T: '${host.tok}'}\n")


CASES = [
    *section("plan files that are not plan files",
        Case("plan is a symlink loop", ["validate", "{tmp}/loop.yaml"], prepare=_symlink_loop,
             says=("plan file is a symlink loop",)),
        Case("extends a symlink loop", ["validate", "{tmp}/p.yaml"], prepare=_symlink_loop,
             files={"p.yaml": "name: x\nextends: loop.yaml\n"}, at=("p.yaml:2:10",), says=("symlink loop",)),
        Case("overlay is a symlink loop", ["validate", "{tmp}/p.yaml", "-f", "{tmp}/loop.yaml"],
             prepare=_symlink_loop, files={"p.yaml": GOOD}, says=("overlay file is a symlink loop",)),
        Case("inventory is a symlink loop", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/loop.yaml"],
             prepare=_symlink_loop, files={"p.yaml": GOOD}, says=("inventory file is a symlink loop",)),
        Case("plan is a FIFO", ["validate", "{tmp}/fifo.yaml"], prepare=_fifo,
             says=("not a regular file",)),
        Case("inventory is a FIFO", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/fifo.yaml"], prepare=_fifo,
             files={"p.yaml": GOOD}, says=("not a regular file",)),
        Case("plan is binary", ["validate", "{tmp}/bin.yaml"], prepare=_binary, says=("not UTF-8",)),
        Case("plan is a directory", ["validate", "{tmp}"], says=("is a directory",)),
        Case("plan is missing", ["validate", "{tmp}/nope.yaml"], says=("plan file not found",)),
        Case("plan is huge", ["validate", "{tmp}/huge.yaml"], prepare=_huge, says=("too large",)),
        Case("plan is /dev/zero", ["validate", "/dev/zero"], says=("not a regular file",)),
        Case("inventory is missing", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/nope.yaml"],
             files={"p.yaml": GOOD}, says=("inventory file not found",)),
    ),
    *section("--set",
        Case("--set deletes the name", ["validate", "{tmp}/p.yaml", "--set", "name=null"],
             files={"p.yaml": GOOD}, says=("--set name=null", "deleted by --set name=null")),
        Case("--set extends", ["validate", "{tmp}/p.yaml", "--set", "extends=../nope.yaml"],
             files={"p.yaml": GOOD}, says=("extends cannot be set with --set",)),
        Case("--set without =", ["validate", "{tmp}/p.yaml", "--set", "name"], files={"p.yaml": GOOD},
             says=("--set name",)),
        Case("--set bad YAML", ["validate", "{tmp}/p.yaml", "--set", "vars.x=[1"],
             files={"p.yaml": GOOD}, says=("not valid YAML",)),
        Case("--set into a scalar", ["validate", "{tmp}/p.yaml", "--set", "name.x=1"],
             files={"p.yaml": GOOD}, says=("--set name.x=1",)),
        Case("--set a number where text is expected, via vars",
             ["validate", "{tmp}/p.yaml", "--set", "vars.v=0.20"],
             files={"p.yaml": "name: x\nvars: {v: '1'}\npython: {venv: /opt/v}\nservice:\n  model: m\n"
                              "  sim: {vllm_version: '${vars.v}'}\n"},
             at=("p.yaml:6:23",), says=("set by --set vars.v=0.20", "quote it there")),
        Case("--set an unknown key", ["validate", "{tmp}/p.yaml", "--set", "servce.port=1"],
             files={"p.yaml": GOOD}, says=("did you mean", "service")),
    ),
    *section("values that reach hosts",
        Case("venv with a command substitution", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: \"/tmp/v$(touch /tmp/PWNED)\"}\n"},
             at=("p.yaml:2:16",), says=("holds characters a host path must not",)),
        Case("venv with backticks", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: \"/tmp/v`id`\"}\n"},
             at=("p.yaml:2:16",), says=("holds characters a host path must not",)),
        Case("venv with a semicolon", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: \"/tmp/v;id\"}\n"},
             at=("p.yaml:2:16",), says=("holds characters a host path must not",)),
        Case("venv climbing out", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/../../etc}\n"}, at=("p.yaml:2:16",), says=("'..'",)),
        Case("service name injection, even for stop", ["stop", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\nservice:\n  model: m\n"
                              "  backend: systemd\n  name: \"svc;touch /tmp/PWNED;#\"\n"},
             at=("p.yaml:6:9",), says=("expected a service name",)),
        Case("service name traversal", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\nservice: {model: m, name: ../../../../tmp/x}\n"},
             at=("p.yaml:3:27",), says=("expected a service name",)),
        Case("file path with a newline", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nfiles: [{path: \"/etc/a\\nb\", content: x}]\n"},
             at=("p.yaml:2:16",), says=("holds characters a host path must not",)),
        Case("collect a relative path", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\ncollect: [{path: etc/passwd}]\n"}, at=("p.yaml:2:18",), says=("absolute path",)),
        Case("interpreter with a pipe", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v, interpreter: \"python3|id\"}\n"},
             at=("p.yaml:2:37",), says=("expected a command name",)),
        Case("NUL in the model", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\nservice: {model: \"m\\0x\"}\n"},
             at=("p.yaml:3:18",), says=("NUL byte",)),
        Case("line break in an env value", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nenv: {X: \"a\\nb\"}\n"}, at=("p.yaml:2:10",), says=("line break",)),
        Case("line break in an API key", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\nservice: {model: m, api_key: \"a\\nb\"}\n"},
             at=("p.yaml:3:30",), says=("line break",)),
        Case("secret on a command line", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\nservice:\n  model: m\n"
                              "  extra_args: ['--hf-token', '${env:HF_TOKEN}']\n"},
             at=("p.yaml:5:30",), says=("HF_TOKEN",)),
        Case("a missing secret", ["plan", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nhosts: localhost\nenv: {T: '${env:ORCH_CORPUS_NOT_SET}'}\n"},
             at=("env.T at p.yaml:3",), says=("ORCH_CORPUS_NOT_SET", "not set in the environment")),
    ),
    *section("inventories",
        Case("group names an unknown host", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": GOOD, "i.yaml": "hosts: {a: {connection: local}}\ngroups: {g: [a, b]}\n"},
             at=("i.yaml:2:17",), says=("names unknown host 'b'",)),
        Case("group cycle", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": GOOD,
                    "i.yaml": "hosts: {a: {connection: local}}\ngroups:\n  g1: [g2]\n  g2: [g1]\n"},
             at=("i.yaml:3:7",), says=("cycle: g1 -> g2 -> g1",)),
        Case("jump names no host", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\n",
                    "i.yaml": "hosts:\n  a: {address: 127.0.0.1, jump: bastoin}\n"},
             at=("i.yaml:2:33",), says=("jump 'bastoin' is not a host of this inventory",)),
        Case("jump loop", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\n",
                    "i.yaml": "hosts:\n  a: {address: 127.0.0.1, jump: b}\n  b: {address: 127.0.0.1, jump: a}\n"},
             says=("loop",)),
        Case("port out of range", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\n", "i.yaml": "hosts: {a: {port: 70000}}\n"},
             at=("i.yaml:1:19",), says=("65535",)),
        Case("unknown host key in the inventory", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\n", "i.yaml": "hosts: {a: {adress: x}}\n"},
             at=("i.yaml:1:13",), says=("did you mean", "address")),
        Case("plan names a host the inventory lacks", ["plan", "{tmp}/p.yaml"],
             files={"p.yaml": "name: ok\nhosts: gpu9\n"}, says=("no host or group named 'gpu9'",)),
        Case("--limit names a host outside the plan", ["plan", "{tmp}/p.yaml", "--limit", "zz"],
             files={"p.yaml": GOOD}, says=("--limit names zz",)),
        Case("a port that is not SSH", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\nfiles: [{path: /tmp/orch-corpus-x, content: x}]\n",
                    "i.yaml": "hosts: {a: {address: 127.0.0.1, port: {http}}}\nssh: {known_hosts: false}\n"},
             says=("is not an SSH server", "HTTP/1.1")),
        Case("a port nobody listens on", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a\nfiles: [{path: /tmp/orch-corpus-x, content: x}]\n",
                    "i.yaml": "hosts: {a: {address: 127.0.0.1, port: 1}}\n"
                              "ssh: {known_hosts: false, connect_retries: 0}\n"},
             says=("refused",)),
    ),
    *section("run folders and run references",
        Case("runs dir is a file", ["apply", "{tmp}/p.yaml", "--runs-dir", "{tmp}/runs"],
             prepare=_unwritable_runs, files={"p.yaml": GOOD}, says=("cannot create the run folder",)),
        Case("--locked on a folder that is not a run", ["apply", "--locked", "{tmp}"],
             says=("not a run folder",)),
        Case("--locked with a plan too", ["apply", "{tmp}/p.yaml", "--locked", "{tmp}"],
             files={"p.yaml": GOOD}, code=64, says=("give a PLAN, or --locked",)),
        Case("compare a run that does not exist", ["compare", "nope-plan"],
             says=("no run folder or plan named 'nope-plan'",)),
        Case("report of nothing", ["report", "{tmp}/nope"], says=("no such run folder",)),
        Case("diagnose a binary log", ["diagnose", "/bin/sh"], says=("not",)),
        Case("diagnose a missing log", ["diagnose", "{tmp}/nope.log"], says=("nope.log",)),
    ),
    *section("bench",
        Case("bench a server that is not there", ["bench", "--url", "http://127.0.0.1:1"],
             says=("cannot reach",)),
        Case("bench with bad levels", ["bench", "--url", "http://x", "--concurrency", "1,a"], code=64,
             says=("expected levels",)),
    ),
    *section("names that become paths",
        Case("inventory host climbing out (YAML)", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: all\n",
                    "i.yaml": "hosts:\n  ../../../../tmp/x: {connection: local}\n"
                              "groups: {all: [../../../../tmp/x]}\n"},
             at=("i.yaml:2:22",), says=("expected a host name",)),
        Case("inventory host climbing out (INI)", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.ini"],
             files={"p.yaml": "name: ok\nhosts: all\n",
                    "i.ini": "[all]\n../../../../tmp/x ansible_connection=local\n"},
             at=("i.ini:2:1",), says=("expected a host name",)),
        Case("inventory host with a slash", ["plan", "{tmp}/p.yaml", "-i", "{tmp}/i.yaml"],
             files={"p.yaml": "name: ok\nhosts: a/b\n", "i.yaml": "hosts: {a/b: {connection: local}}\n"},
             at=("i.yaml:1:14",), says=("expected a host name",)),
        Case("plan name climbing out", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: ../../x\n"}, at=("p.yaml:1:7",), says=("expected a plan name",)),
        Case("check name climbing out", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nsmoke: [{name: ../../x, prompt: hi}]\n"},
             at=("p.yaml:2:16",), says=("expected a check name",)),
        Case("two checks, one file", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nsmoke: [{name: a, prompt: x}, {name: a, prompt: y}]\n"},
             at=("p.yaml:2:38",), says=("'a' is given twice",)),
    ),
    *section("files that are not files",
        Case("a run's meta.json is a FIFO", ["runs"], prepare=_fifo_meta, code=0,
             says=("not a regular file (a FIFO)",)),
        Case("a template is a FIFO", ["plan", "{tmp}/p.yaml"], prepare=_fifo_template,
             files={"p.yaml": "name: x\nhosts: localhost\nfiles: [{path: /tmp/orch-corpus-t, template: t.j2}]\n"},
             at=("p.yaml:3:46",), says=("template",)),
        Case("a plan file target that is a device", ["plan", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nhosts: localhost\nfiles: [{path: /dev/null, content: x}]\n"},
             says=("/dev/null is a character device on the host",)),
    ),
    *section("inputs that exploded",
        Case("40 variables each doubling the last", ["validate", "{tmp}/p.yaml"], prepare=_doubling_vars,
             at=("p.yaml:23:8",), says=("larger than 8,388,608 characters",)),
        Case("a chain of 2,000 variables", ["validate", "{tmp}/p.yaml"], prepare=_chained_vars,
             at=("p.yaml:102:10",), says=("more than 100 deep",)),
        Case("--set a list 60,000 deep", ["validate", "{tmp}/p.yaml", "--set", DEEP_SET],
             files={"p.yaml": GOOD}, says=("nests deeper than 64 levels",)),
        Case("--set a list 70 deep", ["validate", "{tmp}/p.yaml", "--set", "vars.x=" + "[" * 70 + "]" * 70],
             files={"p.yaml": GOOD}, says=("nests deeper than 64 levels",)),
        Case("a freeze.txt line that is not a pin, --locked", ["plan", "--locked",
                                                              RUN],
             prepare=locked_run("vllm==0.17.1\n$(touch /tmp/PWNED)\n"),
             at=("hosts/localhost/freeze.txt:2:",), says=("not an exact pin",)),
    ),
    *section("templates come from the plan's folder",
        Case("a template climbing out", ["plan", "{tmp}/sub/p.yaml"], prepare=_escape_template,
             at=("p.yaml:2:46",), says=("outside the folder of the file that names it",)),
        Case("an absolute template", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nfiles: [{path: /tmp/orch-corpus-t, template: /etc/passwd}]\n"},
             at=("p.yaml:2:46",), says=("outside the folder of the file that names it",)),
        Case("a template symlinked out", ["validate", "{tmp}/p.yaml"], prepare=_symlink_template,
             files={"p.yaml": "name: x\nfiles: [{path: /tmp/orch-corpus-t, template: t.j2}]\n"},
             at=("p.yaml:2:46",), says=("outside the folder of the file that names it",)),
        Case("bench with a negative duration", ["bench", "--url", "http://127.0.0.1:1", "--duration=-5s"],
             code=64, says=("invalid benchmark options",)),
    ),
    *section("no writer writes inside a run folder",
        Case("report -o over a run's meta.json", ["report", RUN, "-o", f"{RUN}/meta.json"],
             code=64, prepare=locked_run("a==1\n"),
             says=("inside the run folder", "never writes over a run's records")),
        Case("compare --plots into a run folder", ["compare", RUN, "--plots", f"{RUN}/hosts"],
             code=64, prepare=locked_run("a==1\n"), says=("--plots", "inside the run folder")),
        Case("schema -o over a run's plan.yaml", ["schema", "-o", f"{RUN}/plan.yaml"],
             code=64, prepare=locked_run("a==1\n"), says=("-o", "inside the run folder")),
        Case("init --dir a run folder", ["init", "x", "--sim", "--dir", RUN],
             code=64, prepare=locked_run("a==1\n"), says=("--dir", "inside the run folder")),
        Case("bench --result-dir a run's bench", ["bench", "--url", "http://127.0.0.1:1",
                                                  "--result-dir", f"{RUN}/hosts/localhost/bench"],
             code=64, prepare=locked_run("a==1\n"), says=("--result-dir", "inside the run folder")),
        Case("apply --runs-dir inside a run", ["apply", "p.yaml", "--runs-dir", f"{RUN}/hosts"],
             files={"p.yaml": GOOD}, code=64, prepare=locked_run("a==1\n"),
             says=("--runs-dir", "inside the run folder")),
    ),
    *section("values accepted that should not be",
        Case("a setuid file mode", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nfiles:\n  - {path: /usr/local/bin/x, content: a, mode: '4755'}\n"},
             at=("p.yaml:3:48",), says=("mode 4755 sets the setuid", "special_bits: true")),
        Case("a sticky file mode", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nfiles:\n  - {path: /srv/x, content: a, mode: '1777'}\n"},
             at=("p.yaml:3:38",), says=("mode 1777 sets the setuid, setgid or sticky bit",)),
        Case("a secret in a command's script", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\ncommands:\n  - name: c\n"
                              "    shell: echo ${env:HF_TOKEN}\n"},
             at=("p.yaml:5:12",), says=("${env:HF_TOKEN} cannot stand here", "field: commands.0.shell")),
        Case("a secret in the bench prompt", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nbench: {prompt: 'say ${env:API_KEY}'}\n"},
             at=("p.yaml:2:17",), says=("${env:API_KEY} cannot stand here", "field: bench.prompt")),
        Case("a secret written out in env", ["validate", "{tmp}/p.yaml"],
             files={"p.yaml": "name: x\nenv:\n  HF_TOKEN: hf_written_out_token\n"},
             at=("p.yaml:3:13",), says=("env.HF_TOKEN: a secret written out in the plan",
                                        "${env:HF_TOKEN}")),
        Case("a secret written out by --set", ["plan", "p.yaml", "--set",
                                               "env.VLLM_API_KEY=sk-written-out"],
             files={"p.yaml": "name: x\npython: {venv: /opt/v}\n"},
             at=("--set env.VLLM_API_KEY=***",), says=("a secret written out in the plan",
                                                       "${env:VLLM_API_KEY}")),
        Case("a secret in an inventory host variable", ["plan", "p.yaml", "-i", "inv.yaml"],
             files={"p.yaml": _HOST_VAR_PLAN,
                    "inv.yaml": "hosts:\n  localhost:\n    connection: local\n"
                                "    vars: {tok: '${env:HOME}'}\n"},
             at=("inv.yaml:4:17",), says=("field: hosts.localhost.vars.tok",
                   "secrets are named in the plan, not the inventory")),
        Case("a secret in an Ansible INI group variable", ["plan", "p.yaml", "-i", "inv.ini"],
             files={"p.yaml": _HOST_VAR_PLAN,
                    "inv.ini": "[g]\nlocalhost ansible_connection=local\n\n[g:vars]\n"
                               "tok=${env:HOME}\n"},
             at=("inv.ini:5:5",), says=("secrets are named in the plan, not the inventory",)),
    ),
]
