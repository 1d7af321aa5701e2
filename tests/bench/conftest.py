"""Fixtures of the benchmark engine's tests: the known-timing streaming server of
benchmarks/stream_server.py, run as a real subprocess on a loopback port."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

