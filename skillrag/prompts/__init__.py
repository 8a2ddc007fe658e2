"""Prompt templates live as plain text files beside this module; code only fills them in."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_prompt(name: str) -> str:
    """The text of `<name>.txt` in this package (cached)."""
    return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
