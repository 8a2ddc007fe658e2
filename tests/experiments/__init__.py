"""Tests of the side experiments' scripts (experiments/<name>/*.py), loaded by path: the folders
are not packages."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_script(relative: str) -> ModuleType:
    """The script `experiments/<relative>` as a module (its `main` is not run)."""
    path = EXPERIMENTS / relative
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
