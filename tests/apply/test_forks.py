"""The forks bound alone (apply/forks.py), with plain callables that record how many run at
once: never more than N, started in order as slots free up, every item ends with a result
(one that raises included), Ctrl-C reaches the waiting main thread at once, and items that
wait for each other (the nodes of a multi-node server at its gate) finish when unbounded."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.orchcli import orch

from orchestrator.apply.forks import DEFAULT_FORKS, run_bounded
from orchestrator.cluster.gate import Gate, Vote
from orchestrator.cluster.topology import build
from orchestrator.engines import engine
from orchestrator.exit_codes import ExitCode


class Recorder:
    """Work that holds its slot for `seconds`, counting how many are inside at once."""

    def __init__(self, seconds: float = 0.05, fail: set[int] | None = None) -> None:
        self.seconds, self.fail = seconds, fail or set()
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.started: list[int] = []

    def __call__(self, item: int) -> str:
        with self.lock:
            self.started.append(item)
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(self.seconds)
            if item in self.fail:
                raise RuntimeError(f"item {item} broke")
            return f"done {item}"
        finally:
            with self.lock:
                self.inside -= 1


def failed(item: int, error: BaseException) -> str:
    return f"failed {item}: {error}"


@pytest.mark.parametrize("forks, items", [(1, 4), (2, 7), (3, 3), (4, 9), (8, 5)])
def test_at_most_forks_at_once_and_every_result_in_place(forks: int, items: int) -> None:
    work = Recorder()
    results = run_bounded(list(range(items)), work, forks=forks, on_error=failed)
    assert results == [f"done {i}" for i in range(items)]
    assert work.most == min(forks, items)  # the bound, and no less: the slots are used
    assert sorted(work.started[:forks]) == list(range(min(forks, items)))  # the first wave


def test_waiting_items_start_in_their_order_as_slots_free() -> None:
    """Slots freed one at a time, out of order: the next waiting item takes each."""
    release = {i: threading.Event() for i in range(6)}
    entered: list[int] = []
    moved = threading.Condition()

    def work(item: int) -> int:
        with moved:
            entered.append(item)
            moved.notify_all()
        assert release[item].wait(10)
        return item

    def entered_count(count: int) -> list[int]:
        with moved:
            assert moved.wait_for(lambda: len(entered) >= count, timeout=10)
        time.sleep(0.05)  # and no more than that: the bound holds
        with moved:
            assert len(entered) == count, entered
            return list(entered)

    results: list[list[int]] = []
    runner = threading.Thread(target=lambda: results.append(
        run_bounded(list(range(6)), work, forks=2, on_error=lambda item, error: -1)))
    runner.start()
    assert sorted(entered_count(2)) == [0, 1]
    for ending, following in [(1, 2), (0, 3), (3, 4), (2, 5)]:
        release[ending].set()
        assert entered_count(len(entered) + 1)[-1] == following
    for event in release.values():
        event.set()
    runner.join(10)
    assert results == [[0, 1, 2, 3, 4, 5]]


def test_unbounded_runs_everything_at_once() -> None:
    work = Recorder(seconds=0.1)
    assert len(run_bounded(list(range(12)), work, forks=None, on_error=failed)) == 12
    assert work.most == 12


def test_an_item_that_raises_gets_its_result_and_frees_its_slot() -> None:
    work = Recorder(fail={0, 3})
    results = run_bounded(list(range(5)), work, forks=1, on_error=failed)
    assert results == ["failed 0: item 0 broke", "done 1", "done 2", "failed 3: item 3 broke",
                       "done 4"]
    assert work.most == 1


def test_a_single_item_runs_in_the_calling_thread_and_keeps_its_result_on_error() -> None:
    threads: list[str] = []

    def work(item: int) -> str:
        threads.append(threading.current_thread().name)
        raise ValueError("bug")

    assert run_bounded([1], work, forks=4, on_error=failed) == ["failed 1: bug"]
    assert threads == [threading.main_thread().name]


def test_threads_are_named_by_label() -> None:
    names: list[str] = []
    run_bounded(["a", "b"], lambda item: names.append(threading.current_thread().name),
                forks=2, on_error=lambda item, error: None, label=lambda item: f"host-{item}")
    assert sorted(names) == ["host-a-0", "host-b-1"]


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        run_bounded([1, 2], str, forks=0, on_error=failed)
    assert DEFAULT_FORKS >= 1


@pytest.mark.parametrize("command", ["apply", "plan", "restart"])
def test_the_cli_refuses_forks_below_one_as_a_usage_error(tmp_path: Path, command: str) -> None:
    result = orch(command, tmp_path / "plan.yaml", "--forks", "0", cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "--forks must be at least 1, got 0" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture()
def sigint_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_reaches_the_main_thread_at_once_while_items_work_and_wait(
    sigint_raises: None,
) -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def work(item: int) -> int:
        entered.release()
        release.wait(30)  # a host that would take long: the interrupt does not wait for it
        return item

    threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_bounded(list(range(6)), work, forks=2, on_error=lambda item, error: -1)
        assert time.monotonic() - started < 2.0
        assert entered.acquire(timeout=1) and entered.acquire(timeout=1)
        assert not entered.acquire(timeout=0.1)  # only 2 slots: the others never started
    finally:
        release.set()


def test_nodes_that_vote_at_a_real_gate_all_finish_when_unbounded() -> None:
    """The deadlock rule's other half: apply/run.py runs a gated run unbounded (forks=None),
    because each node's vote waits for every other node's."""
    hosts = [f"n{i}" for i in range(1, 6)]
    topology = build(backend="ray", hosts=hosts, head=None,
                     addresses={h: f"10.0.0.{i + 1}" for i, h in enumerate(hosts)},
                     args={"tensor-parallel-size": 8, "pipeline-parallel-size": 5},
                     gpus_per_node=8, ray_port=6379, master_port=29501, ray_args=[],
                     engine=engine("vllm"))
    gate = Gate(topology, check_gpus=False, timeout=10)

    def node(host: str) -> bool:
        return gate.vote(host, Vote(reason=None)).restart

    assert run_bounded(hosts, node, forks=None, on_error=lambda host, error: True) == [False] * 5
