"""`orch bench` against real misbehaving servers on 127.0.0.1 (tests/fixtures/hostile_server.py):
an answer orch cannot use is a failed request with its reason, never a traceback, a silent
success or a nan; what a server says reaches the terminal escaped (checked on a real
pseudo-terminal); credentials in --url are masked like any secret."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fixtures.hostile_server import Misbehaviour, hostile_server
from fixtures.orchcli import orch
from fixtures.terminal import PseudoTerminal

QUICK = ("--concurrency", "1", "--requests", "2", "--warmup", "0", "--no-metrics")
# what a hostile server would make the terminal do: set its title, clear it, colour text
HOSTILE = "evil\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[31m[link=http://x]click[/link]"


def _bench(url: str, out: Path, *extra: str) -> tuple[int, str]:
    result = orch("bench", "--url", url, *QUICK, "--result-dir", out, *extra, cwd=out.parent,
                  timeout=120)
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "Fatal error" not in output, output
    return result.returncode, " ".join(output.split())


def _level(out: Path) -> dict[str, object]:
    found: dict[str, object] = json.loads((out / "level-c1.json").read_text())
    return found


@pytest.mark.parametrize(("how", "reason"), [
    (Misbehaviour(content_length="abc"), "Content-Length b'abc' is not a length"),
    (Misbehaviour(content_length="-5"), "Content-Length b'-5' is not a length"),
    (Misbehaviour(data_lines=("hello", "world", "[DONE]")), "an event that is not JSON: b'hello'"),
    (Misbehaviour(data_lines=("{not json", "[DONE]")), "the stream held no completion"),
    (Misbehaviour(content_type="text/html"), "the answer is not an event stream"),
    (Misbehaviour(usage={"prompt_tokens": 3, "completion_tokens": -537481}),
     "usage.completion_tokens is -537481: not a token count"),
    (Misbehaviour(usage={"prompt_tokens": 3, "completion_tokens": "12"}),
     "usage.completion_tokens is '12': not a token count"),
], ids=["content-length-abc", "content-length-negative", "data-not-json", "data-broken-json",
        "stream-as-html", "negative-usage", "usage-as-text"])
@pytest.mark.slow
def test_an_answer_that_is_not_an_answer_is_a_failed_request(tmp_path: Path, how: Misbehaviour,
                                                              reason: str) -> None:
    out = tmp_path / "out"
    with hostile_server(how) as url:
        code, said = _bench(url, out)
    assert code == 1, said
    assert f"2 failed; the server said: {reason}" in said
    level = _level(out)
    assert level["completed"] == 0 and level["failed"] == 2


@pytest.mark.parametrize("scale", ["nan", "-1", "0", "inf", "abc"])
@pytest.mark.slow
def test_a_time_scale_that_is_not_one_is_ignored(tmp_path: Path, scale: str) -> None:
    out = tmp_path / "out"
    with hostile_server(Misbehaviour(simulator=f"profile=x; time-scale={scale}")) as url:
        code, said = _bench(url, out)
    assert code == 0, said
    assert "nan" not in said and "inf" not in said and "-" not in said.split("tok/s")[0][-12:]
    level = _level(out)
    assert "normalized" not in level
    throughput = level["output_throughput"]
    assert isinstance(throughput, float) and math.isfinite(throughput) and throughput > 0


def test_a_good_answer_still_counts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with hostile_server(Misbehaviour(usage={"prompt_tokens": 3, "completion_tokens": 5})) as url:
        code, said = _bench(url, out)
    assert code == 0, said
    assert _level(out)["completed"] == 2


def test_what_a_server_says_reaches_a_terminal_escaped(tmp_path: Path) -> None:
    """A real pseudo-terminal: the model id and the error message hold escape sequences and
    rich markup; none reaches the terminal as a control or a style."""
    how = Misbehaviour(model_id=HOSTILE, status=500, error_message=HOSTILE)
    with hostile_server(how) as url:
        terminal = PseudoTerminal(["bench", "--url", url, *QUICK, "--result-dir",
                                   str(tmp_path / "out")], cwd=tmp_path)
        terminal.expect("no request succeeded", timeout=60)
        code = terminal.finish()
    assert code == 1
    # the title, the clear, the red and the link (orch's own "error:" is red: not these)
    for control in ("\x1b]0;", "\x1b[2J", "\x1b[31m[link", "\x1b]8;"):
        assert control not in terminal.raw, repr(terminal.raw)
    assert "Benchmark: evil\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b[31m[link=http://x]click[/link]" \
        in terminal.output
    assert "HTTP 500 Oops: evil\\x1b]0;PWNED-TITLE" in terminal.output


def test_credentials_in_the_url_are_masked_on_screen_and_on_disk(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with hostile_server(Misbehaviour(usage={"prompt_tokens": 3, "completion_tokens": 5})) as url:
        hostile = url.replace("http://", "http://bob:pw@")
        code, said = _bench(hostile, out)
    assert code == 0, said
    assert "bob" not in said and "pw@" not in said and "http://***@127.0.0.1" in said
    for written in out.iterdir():
        text = written.read_text()
        assert "bob:pw" not in text, written
