"""The retry policy on its own: which failures are retried, how often, who is told."""

from __future__ import annotations

import pytest

from orchestrator.errors import AuthError, CommandFailed, ConnectError, HostKeyError, TransportError
from orchestrator.transport.retry import Backoff, PermanentConnectError, call_with_retries

FAST = Backoff(first=0.001, maximum=0.004)


class Flaky:
    """Fails with the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: TransportError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_backoff_doubles_up_to_the_maximum() -> None:
    assert Backoff().delays(7) == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_transient_failures_are_retried_and_reported() -> None:
    seen: list[tuple[str, int, str]] = []
    flaky = Flaky(ConnectError("refused", host="h1"), ConnectError("reset", host="h1"))
    result = call_with_retries(
        flaky, host="h1", retries=4, backoff=FAST, on_retry=lambda h, n, e: seen.append((h, n, str(e)))
    )
    assert result == "ok"
    assert flaky.calls == 3
    assert seen == [("h1", 1, "h1: refused"), ("h1", 2, "h1: reset")]


def test_giving_up_says_how_many_attempts() -> None:
    flaky = Flaky(*[ConnectError("connection refused", host="h1", hint="is sshd up?")] * 3)
    with pytest.raises(ConnectError) as caught:
        call_with_retries(flaky, host="h1", retries=2, backoff=FAST)
    assert flaky.calls == 3
    assert caught.value.message == "h1: connection refused (gave up after 3 attempts)"
    assert caught.value.hint == "is sshd up?"
    assert caught.value.host == "h1"


@pytest.mark.parametrize(
    "error",
    [
        AuthError("denied", host="h1"),
        HostKeyError("unknown key", host="h1"),
        CommandFailed("false", 1, "", host="h1"),
        PermanentConnectError("no such host", host="h1"),
    ],
    ids=["auth", "host key", "command", "permanent"],
)
def test_permanent_failures_fail_at_once(error: TransportError) -> None:
    seen: list[int] = []
    flaky = Flaky(error)
    with pytest.raises(type(error)) as caught:
        call_with_retries(flaky, host="h1", retries=4, backoff=FAST, on_retry=lambda h, n, e: seen.append(n))
    assert caught.value is error
    assert flaky.calls == 1
    assert seen == []


def test_zero_retries_raises_the_first_error_unchanged() -> None:
    error = ConnectError("refused", host="h1")
    with pytest.raises(ConnectError) as caught:
        call_with_retries(Flaky(error), host="h1", retries=0, backoff=FAST)
    assert caught.value is error
