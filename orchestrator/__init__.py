"""orch: deploy and benchmark vLLM on GPU hosts from a declarative plan."""

__version__ = "0.1.0"
