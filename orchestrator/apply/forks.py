"""At most N hosts at once (Ansible's `forks`, pyinfra's `--parallel`): each item runs in a
daemon thread of its own; the items beyond the bound wait and start in their order as the
running ones end. Knows nothing of hosts or SSH: `run_bounded(items, work, ...)`."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

# Enough to keep a rack's hosts busy at once, few enough that the controller (one Python
# interpreter: SSH crypto and probe parsing under one GIL, a socket and a thread per host)
# is not what a large inventory waits on.
DEFAULT_FORKS = 32

T = TypeVar("T")
R = TypeVar("R")

_POLL_SECONDS = 0.2  # how often the main thread wakes while it waits: Ctrl-C is never held


def run_bounded(items: Sequence[T], work: Callable[[T], R], *, forks: int | None,
                on_error: Callable[[T, BaseException], R],
                label: Callable[[T], str] = lambda item: "item") -> list[R]:
    """`work(item)` for every item, at most `forks` at once (None: all at once); the results
    in the items' order. An item whose `work` raises gets `on_error(item, error)` and frees
    its slot like any other; `label(item)` names its thread. A single item runs in the
    calling thread (so a benchmark can take Ctrl-C gracefully).

    The main thread only waits, with a timeout, so Ctrl-C reaches it at once; the workers are
    daemon threads, so an interrupted run does not wait for the items still working."""
    if forks is not None and forks < 1:
        raise ValueError(f"forks must be at least 1, got {forks}")
    if len(items) == 1:
        try:
            return [work(items[0])]
        except Exception as error:  # Ctrl-C (KeyboardInterrupt) goes through
            return [on_error(items[0], error)]
    results: dict[int, R] = {}
    ended: queue.SimpleQueue[int] = queue.SimpleQueue()

    def run(index: int) -> None:
        try:
            results[index] = work(items[index])
        except BaseException as error:  # a bug, not the item's own failure: it still ends
            results[index] = on_error(items[index], error)
        finally:
            ended.put(index)  # whatever happened: its slot is free

    def start(index: int) -> None:
        threading.Thread(target=run, args=(index,), daemon=True,
                         name=f"{label(items[index])}-{index}").start()

    slots = len(items) if forks is None else min(forks, len(items))
    for index in range(slots):
        start(index)
    waiting = iter(range(slots, len(items)))
    for _ in items:  # one slot frees per item ending; the next waiting item takes it
        while True:
            try:
                ended.get(timeout=_POLL_SECONDS)
                break
            except queue.Empty:
                continue
        following = next(waiting, None)
        if following is not None:
            start(following)
    return [results[index] for index in range(len(items))]
