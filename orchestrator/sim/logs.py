"""vLLM's log line format (facts §8.1), flushed line by line, secrets masked.

`(APIServer pid=123) INFO 02-13 00:28:06 [api_server.py:1885] message` for logger lines;
`(APIServer pid=123) <text>` for what a process prints itself (tqdm bars, uvicorn, uncaught
tracebacks). Multi-line messages repeat the prefix on every line, as vLLM's does.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from orchestrator.masking import mask


class VllmLog:
    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        pid: int | None = None,
    ) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self.pid = os.getpid() if pid is None else pid

    def _emit(self, stream: TextIO, lines: list[str]) -> None:
        try:
            stream.write(mask("".join(lines)))
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads the log any more; keep serving

    def line(self, proc: str, level: str, where: str, message: str) -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        prefix = f"({proc} pid={self.pid}) {level} {stamp} [{where}] "
        self._emit(self._out, [prefix + part + "\n" for part in message.split("\n")])

    def info(self, proc: str, where: str, message: str) -> None:
        self.line(proc, "INFO", where, message)

    def warning(self, proc: str, where: str, message: str) -> None:
        self.line(proc, "WARNING", where, message)

    def error(self, proc: str, where: str, message: str) -> None:
        self.line(proc, "ERROR", where, message)

    def raw(self, proc: str, text: str, *, stderr: bool = False) -> None:
        prefix = f"({proc} pid={self.pid}) "
        lines = [prefix + part + "\n" for part in text.split("\n")]
        self._emit(self._err if stderr else self._out, lines)

    def uvicorn(self, message: str) -> None:
        self.raw("APIServer", f"INFO:     {message}")
