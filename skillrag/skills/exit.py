"""The exit skill: stop retrieving when more search will not help (paper §3.2)."""

from __future__ import annotations

from typing import Literal


def exit_answer(current: str, mode: Literal["answer", "abstain"], abstain_answer: str) -> str:
    """The current answer (paper default) or, in abstain mode, the fixed abstention."""
    return current if mode == "answer" else abstain_answer
