"""Host facts: what the probe learns of a host in ONE round trip.

Each fact is one module holding both halves: its host side (gathered by the program shipped
to the host's python3: stdlib only, Python 3.8) and its controller side (the typed value and
its pure parser). program.py assembles the program from the modules; docs/concepts.md,
"Adding a host fact", says what a new one takes.
"""

from orchestrator.facts.answer import Facts, parse_answer
from orchestrator.facts.engine_build import EngineBuild
from orchestrator.facts.files import FileFacts
from orchestrator.facts.gpus import Gpu, GpuApp
from orchestrator.facts.guards import Guard
from orchestrator.facts.host import HostFacts
from orchestrator.facts.installed_files import RecordFacts
from orchestrator.facts.probe import build_stdin, probe
from orchestrator.facts.processes import Process
from orchestrator.facts.program import program_source
from orchestrator.facts.request import ProbeRequest
from orchestrator.facts.service import OtherInstance, PortFacts, ServiceFacts
from orchestrator.facts.venv import Distribution, VenvFacts

__all__ = [
    "Distribution",
    "EngineBuild",
    "Facts",
    "FileFacts",
    "Gpu",
    "GpuApp",
    "Guard",
    "HostFacts",
    "OtherInstance",
    "PortFacts",
    "ProbeRequest",
    "Process",
    "RecordFacts",
    "ServiceFacts",
    "VenvFacts",
    "build_stdin",
    "parse_answer",
    "probe",
    "program_source",
]
