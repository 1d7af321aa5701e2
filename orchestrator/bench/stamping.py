"""Arrival stamps taken when the event loop's `select()` returns.

A stamp taken inside `data_received` grows with the socket's place in the loop's queue
when many streams become ready at once (C=128, tokens written in the same millisecond).
A loop made by `stamping_loop()` records the moment its `select()` returned, the same for
every socket of that wake-up, and the streaming client uses it as the arrival time. Bytes
that land between `select()` and the read share that stamp; they are rare, and off by
less than one loop iteration either way.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

_perf_ns = time.perf_counter_ns
T = TypeVar("T")


class ArrivalClock:
    """When the loop last learned that sockets were ready (perf_counter ns)."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0


class StampingSelector(selectors.BaseSelector):
    """The platform's default selector, stamping the clock each time `select()` returns."""

    def __init__(self, clock: ArrivalClock) -> None:
        self._inner = selectors.DefaultSelector()
        self._clock = clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._inner.select(timeout)
        self._clock.ns = _perf_ns()
        return ready

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ArrivalClock] = weakref.WeakKeyDictionary()


def stamping_loop() -> asyncio.AbstractEventLoop:
    """A new event loop whose connections stamp arrivals at `select()` time."""
    clock = ArrivalClock()
    loop = asyncio.SelectorEventLoop(StampingSelector(clock))
    _CLOCKS[loop] = clock
    return loop


def clock_of(loop: asyncio.AbstractEventLoop) -> ArrivalClock | None:
    """The arrival clock of a loop made by `stamping_loop()`, else None."""
    return _CLOCKS.get(loop)


def run_on_stamping_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end on a stamping loop: from sync code at once; from async code
    on a thread of its own, with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=stamping_loop) as loop_runner:
            return loop_runner.run(coroutine)
    box: list[T] = []
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            with asyncio.Runner(loop_factory=stamping_loop) as own:
                box.append(own.run(coroutine))
        except BaseException as error:  # handed back to the caller's thread
            errors.append(error)

    thread = threading.Thread(target=runner, name="orch-bench")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]
