"""Where the numbers come from: the code, libraries, model, data, index and parameters recorded in
each run's settings sidecar and in the prober's record, and the code that wrote the report."""

from __future__ import annotations

from collections import defaultdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from skillrag.gitutil import head
from skillrag.paths import GENERATED
from skillrag.report.inputs import Inputs
from skillrag.report.tables import markdown_table

REPORT_LIBRARIES = ("numpy", "scikit-learn", "matplotlib", "great_expectations", "dvc")


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def workspace_commit(root: Path) -> str:
    """The git commit of the project the report describes (the one `dvc metrics diff` compares
    from), marked when its code or params have uncommitted changes; "no git repository" outside one."""
    state = head(root, ignoring=GENERATED)
    if state is None:
        return "no git repository"
    commit, dirty = state
    return commit + (" (uncommitted changes)" if dirty else "")


def _values(found: dict[str, set[str]]) -> list[list[str]]:
    return [[key, ", ".join(sorted(values))] for key, values in sorted(found.items())]


def _licence(licence: object) -> str:
    """A model identity's licence ({spdx, note}) as text; "not recorded" when absent."""
    if isinstance(licence, dict):
        return " — ".join(str(licence[key]) for key in ("spdx", "note") if licence.get(key))
    return str(licence) if licence else "not recorded"


def provenance_section(inputs: Inputs, root: Path) -> str:
    """Markdown: what the runs recorded (every distinct value; several mean the runs differ), the
    prober's record, and the report's own code and libraries."""
    runs: dict[str, set[str]] = defaultdict(set)
    params: dict[str, set[str]] = defaultdict(set)
    for by_dataset in inputs.settings.values():
        for dataset, settings in by_dataset.items():
            for entry in settings.get("provenance", []):
                for key, value in entry.items():
                    runs[key].add(str(value))
            inputs_ = settings.get("inputs", {})
            model = inputs_.get("model")
            if isinstance(model, dict):
                runs["model"].add(str(model.get("name")))
                runs["model dtype"].add(str(model.get("dtype")))
                runs["model weights digest"].add(str(model.get("digest", model.get("files"))))
                runs["model licence"].add(_licence(model.get("licence")))
            for name in ("index", "prompts", "prober", "router"):
                if name in inputs_:
                    runs[f"{name} digest"].add(str(inputs_[name]))
            if "questions" in inputs_:
                runs[f"questions digest ({dataset})"].add(str(inputs_["questions"]))
            for key, value in settings.get("params", {}).items():
                params[key].add(str(value))
    record = inputs.probe_record
    prober = {key: str(record[key]) for key in ("model", "data_sha256", "states_fingerprint", "hidden_size") if key in record}
    identity = record.get("identity")
    if isinstance(identity, dict):
        prober |= {"model dtype": str(identity.get("dtype")), "model weights digest": str(identity.get("digest")),
                   "model licence": _licence(identity.get("licence"))}
    if "layers" in record:
        prober["layers"] = f"{len(record['layers'])} ({record['layers'][0]}..{record['layers'][-1]})"
    prober |= {f"probe.{k}": str(v) for k, v in record.get("params", {}).items()}
    code = {"git commit": workspace_commit(root), **{lib: _version(lib) for lib in ("skillrag", *REPORT_LIBRARIES)}}
    parts = [
        "**Runs** (from each run's `<dataset>.settings.json`; several values mean the runs differ):\n\n"
        + markdown_table(["recorded", "value"], _values(runs)),
        "**Parameters the methods read** (every distinct value across methods and datasets):\n\n"
        + markdown_table(["param", "value"], _values(params)),
    ]
    if prober:
        parts.append("**Prober** (`data/probe/probe.json`):\n\n" + markdown_table(["recorded", "value"], sorted(prober.items())))
    parts.append("**This report** was written by:\n\n" + markdown_table(["code", "version"], list(code.items())))
    return "\n\n".join(parts)


def model_line(inputs: Inputs) -> str:
    """One line naming the model(s) and dtype(s) the runs used."""
    seen = {
        (str(m.get("name")), str(m.get("dtype")))
        for by in inputs.settings.values()
        for s in by.values()
        if isinstance(m := s.get("inputs", {}).get("model"), dict)
    }
    return ", ".join(f"{name} ({dtype})" for name, dtype in sorted(seen)) or "not recorded"
