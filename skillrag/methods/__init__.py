"""QA methods as small pipelines over shared components; every one returns a Trace."""

from skillrag.answering import Prober, answer_with
from skillrag.methods.base import Components, Method
from skillrag.methods.factory import METHODS, build_method
from skillrag.methods.reuse import ReuseStats, ReusingLM
from skillrag.methods.trace import TERMINATIONS, Cost, Round, Trace

__all__ = [
    "METHODS",
    "TERMINATIONS",
    "Components",
    "Cost",
    "Method",
    "Prober",
    "ReuseStats",
    "ReusingLM",
    "Round",
    "Trace",
    "answer_with",
    "build_method",
]
