"""Why a level plateaus, pure: the topology (`topology`), the figures a verdict needs
(`evidence`), the limiter and the knee (`rules`), what to change in the plan (`advice`).
docs/bench.md, "Why it plateaus: the limiters"."""
