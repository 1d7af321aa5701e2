"""Transports: how orch reaches a host (local subprocess or SSH) to run commands, move files
and forward ports. `connect()` is the entry point; `Transport` is the interface.

Importing this package is cheap: the SSH machinery (fabric, paramiko, tenacity) is imported
only when an SSH host is connected.
"""

from orchestrator.transport.base import Result, Transport
from orchestrator.transport.command import Command, Raw, Secret
from orchestrator.transport.connect import connect

__all__ = ["Command", "Raw", "Result", "Secret", "Transport", "connect"]
