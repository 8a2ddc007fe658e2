"""Great Expectations gates between stages: one suite per artifact kind."""

from skillrag.quality.gate import GateFailed, run_gate

__all__ = ["GateFailed", "run_gate"]
