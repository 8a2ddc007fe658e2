"""`skillrag recommit`: record in dvc.lock a change that leaves every output as it was (a rename, a
docstring, a refactor) without re-running the stages it made stale.

The default run takes 7-12 hours of two cores, and every stage depends on the code it imports, so
without this a renamed module would cost a whole run. DVC's own answer is `dvc commit` ("the stage
has run and its outputs are present: record its new dependencies"); recommit uses it only once the
change is shown to change nothing:

1. `dvc status`: a stale stage is recordable when it is stale for code (files under `skillrag/`),
   params.yaml, or a dependency dvc.yaml lists now and dvc.lock did not record (a renamed module, a
   file a stage now reads). A cache-only output absent here (not in the DVC cache: a new machine
   keeps only git) is no reason to run, as for `skillrag repro`: dvc.lock keeps the hash it
   recorded. One with changed data, git-tracked outputs missing or modified, a changed command,
   or no run at all must run (`skillrag repro`, after this): recording the others first hides
   nothing, since DVC sees a re-run stage's new outputs in its consumers' dependencies.
2. The tiny profile's whole pipeline runs twice, in fresh projects: once with the code, dvc.yaml and
   params.yaml of the base commit, once with the working tree's. Every small output of the
   recordable stages (their JSON, JSON-lines and parquet files: questions, fingerprints, state rows,
   prober and router records, thresholds, traces, metrics, gate results; not the cache-only index,
   vectors and Data Docs, whose identity the fingerprints carry, nor the timings) must be the same
   in both, record by record, wall-clock and provenance fields (VOLATILE) aside and numbers within
   TOLERANCE (float32 rows of differently composed batches differ by ~1e-7).
   The tiny profile exercises every stage and method with a real model and index in minutes.
3. Only then `dvc commit -f` the recordable stages (with DVC's allow-missing, which the command
   line does not offer: an absent cache-only output keeps its recorded hash). Committing dvc.lock is left to you, with the
   check named in the message.

The check cannot see a path the tiny profile does not take (a code branch only larger data reaches):
it is evidence, not proof, which is why params changes are allowed only when the tiny run agrees.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from skillrag.errors import UserError
from skillrag.gitutil import git
from skillrag.vectors import decode_vector

CODE = "skillrag"  # the package: a stage's code deps are it, or files and folders under it
PARAMS = "params.yaml"
# wall-clock seconds (and their interval in metrics_detail.json); which commit and machine ran it
VOLATILE = frozenset({"latency_s", "latency_s_ci95", "compute_s", "provenance"})
VECTORS = frozenset({"state"})  # base64 float32 vectors (skillrag.vectors): compared as numbers
TOLERANCE = 1e-5  # relative and absolute: float32 rows batched differently differ by ~1e-7 (skillrag.eval.runner)
_MISSING = object()
BEHAVIOUR = ("data/**/*.json", "data/**/*.jsonl", "data/**/*.parquet", "reports/**/*.json")  # what the two runs must agree on
SKIPPED = ("data/corpus/", "data/index/", "data/states/vectors/", "data/data_docs/", "reports/timings/")
TINY = "tiny"
NEWLY_LISTED = "newly listed"  # a dependency dvc.yaml lists and dvc.lock did not record
NEVER_RUN = "never run"
ABSENT = "cache-only, absent here"  # a cached output (or a dep that is one) missing from the workspace and cache
_ABSENT_STATUS = frozenset({"not in cache", "deleted"})


class RecommitRefused(UserError):
    """A change recommit will not record; the message says why and what to run instead."""


@dataclass(frozen=True)
class Change:
    """One line of `dvc status` for a stage: `kind` is "changed deps", "changed outs" or a bare
    status such as "changed command" or NEVER_RUN; `path` the dep or out (params.yaml key as
    `params.yaml:key`); `how` what DVC says of it, or NEWLY_LISTED."""

    stage: str
    kind: str
    path: str = ""
    how: str = ""

    @property
    def recordable(self) -> bool:
        """A change of code, params or a newly listed dependency: one the tiny check can vouch for."""
        code = self.path == CODE or self.path.startswith(f"{CODE}/")
        listed = code or self.path.startswith(f"{PARAMS}:") or self.how == NEWLY_LISTED
        return self.kind == "changed deps" and listed

    @property
    def absent(self) -> bool:
        """A cache-only output absent here: neither recordable nor a reason to run."""
        return self.how == ABSENT

    def __str__(self) -> str:
        return f"{self.stage}: {self.kind} {self.path} {self.how}".strip()


def _env(code: Path | None = None) -> dict[str, str]:
    """This interpreter's environment (dvc and the `skillrag` console script beside it); with `code`,
    the skillrag package under `code` is the one imported.

    MKL_CBWR=COMPATIBLE (MKL's conditional numerical reproducibility; a value the user set is kept):
    without it the same code and inputs gave the tiny skill_rag's router scores one of two values
    ~1e-3 apart from run to run (4 runs of the base code: 3 and 1), so recommit refused a change that
    changed nothing; with it, 10 runs of 10 gave one value (measured 2026-12-07, e373729, 2-core
    Intel Xeon with AMX, float32 SmolLM2). Only these two tiny runs are pinned: the pipeline's own
    numerics stay as they are."""
    env = {
        "MKL_CBWR": "COMPATIBLE",
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def _run(command: list[str], cwd: Path, code: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=_env(code), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise RecommitRefused(f"`{' '.join(command)}` failed in {cwd}:\n{tail}")
    return done.stdout


def _recorded_deps(root: Path) -> dict[str, set[str]]:
    """Each stage's dependency paths as dvc.lock recorded them."""
    lock = root / "dvc.lock"
    stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {}) if lock.is_file() else {}
    return {name: {dep["path"] for dep in entry.get("deps", [])} for name, entry in stages.items()}


def _cached_outs(root: Path) -> set[str]:
    """The project's cache-only outputs (DVC's `cache: true`, the default), as dvc.yaml names them."""
    from dvc.repo import Repo  # DVC's import is slow; only recommit needs it

    with Repo(str(root)) as repo:
        return {out.def_path for stage in repo.index.stages for out in stage.outs if out.use_cache}


def stale(root: Path) -> list[Change]:
    """Every change `dvc status` reports for the project's stages; a dependency dvc.lock did not
    record for its stage is NEWLY_LISTED, a stage it does not hold at all NEVER_RUN, a cache-only
    output (or a dependency on one) missing here ABSENT."""
    status: dict[str, list[Any]] = json.loads(_run(["dvc", "status", "--json"], root) or "{}")
    recorded = _recorded_deps(root)
    cached = _cached_outs(root)
    changes = []
    for stage, entries in status.items():
        if stage not in recorded:
            changes.append(Change(stage, NEVER_RUN))
            continue
        for entry in entries:
            if isinstance(entry, str):
                changes.append(Change(stage, entry))
                continue
            for kind, paths in entry.items():
                for path, how in paths.items():
                    if isinstance(how, Mapping):  # params.yaml: {key: how}
                        changes += [Change(stage, kind, f"{path}:{key}", str(h)) for key, h in how.items()]
                    elif kind == "changed deps" and path not in recorded[stage]:
                        changes.append(Change(stage, kind, path, NEWLY_LISTED))
                    elif path in cached and how in _ABSENT_STATUS:
                        changes.append(Change(stage, kind, path, ABSENT))
                    else:
                        changes.append(Change(stage, kind, path, str(how)))
    return changes


def split(changes: list[Change]) -> tuple[list[str], list[Change]]:
    """The recordable stale stages (a `recordable` change and no other but `absent` ones), in status
    order, and the changes that make the other stages need a run."""
    must_run = [change for change in changes if not (change.recordable or change.absent)]
    blocked = {change.stage for change in must_run}
    return list(dict.fromkeys(c.stage for c in changes if c.recordable and c.stage not in blocked)), must_run


def tiny_project(code: Path, dest: Path, root: Path | None = None) -> Path:
    """A fresh project at `dest` to run the tiny profile with the code at `code`: its dvc.yaml, its
    skillrag package and its params.yaml resolved under the tiny profile by that code itself (a base
    whose params differ from today's still resolves), relative paths read from `root` (default:
    `code`), where the project's data paths (`../shared/data`) lead."""
    root = root or code
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(code / "dvc.yaml", dest / "dvc.yaml")
    shutil.copytree(code / "skillrag", dest / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    for side in _side_inputs(code):
        shutil.copytree(code / side, dest / side, ignore=shutil.ignore_patterns("__pycache__"))
    with tempfile.NamedTemporaryFile("w", dir=root, prefix=".recommit-", suffix=".yaml") as params:
        params.write((code / PARAMS).read_text(encoding="utf-8"))
        params.flush()
        resolved = _run(["skillrag", "--params", params.name, "--profile", TINY, "params"], root, code=code)
    (dest / PARAMS).write_text(resolved)
    return dest


def _side_inputs(code: Path) -> list[str]:
    """The project folders a stage reads and no stage writes (the report's side experiments and
    named runs): DVC refuses to run a stage whose dependency is missing, so a tiny project has them."""
    stages = (yaml.safe_load((code / "dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages", {})
    outs = [out if isinstance(out, str) else next(iter(out))
            for entry in stages.values() for kind in ("outs", "metrics", "plots") for out in entry.get(kind, [])]
    deps = dict.fromkeys(dep for entry in stages.values() for dep in entry.get("deps", []))
    return [dep for dep in deps
            if (code / dep).is_dir() and not dep.startswith(("..", "$", CODE))
            and not any(dep == out or out.startswith(f"{dep}/") or dep.startswith(f"{out}/") for out in outs)]


def run_tiny(project: Path) -> Path:
    """`dvc init` and `dvc repro` of the tiny project with its own code; returns the project."""
    _run(["dvc", "init", "--no-scm", "-q"], project)
    return repro_tiny(project)


def repro_tiny(project: Path) -> Path:
    """`dvc repro` of an initialised tiny project with its own code, in the environment `run_tiny`
    used (MKL_CBWR included: a rerun outside it may compute another last digit); returns the project."""
    _run(["dvc", "repro"], project, code=project)
    return project


def _behaviour_files(project: Path) -> set[str]:
    return {
        path.relative_to(project).as_posix()
        for pattern in BEHAVIOUR
        for path in project.glob(pattern)
        if path.is_file() and not path.relative_to(project).as_posix().startswith(SKIPPED)
    }


def _stable(value: Any) -> Any:
    """`value` without its VOLATILE fields, its VECTORS decoded, at any depth."""
    if isinstance(value, Mapping):
        return {
            key: decode_vector(item) if key in VECTORS else _stable(item)
            for key, item in value.items()
            if key not in VOLATILE
        }
    if isinstance(value, list):
        return [_stable(item) for item in value]
    return value


def _records(path: Path) -> list[Any]:
    if path.suffix == ".parquet":
        import pandas as pd

        rows = json.loads(pd.read_parquet(path).to_json(orient="records"))
    else:
        text = path.read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" else [json.loads(text)]
    return [_stable(row) for row in rows]


def _shown(value: Any) -> str:
    return "(missing)" if value is _MISSING else json.dumps(value)[:120]


def _first_difference(first: Any, second: Any, where: str = "") -> str | None:
    """None when two records are the same (numbers within TOLERANCE); else the path to the first
    field that differs, with both values (shortened)."""
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        for key in sorted(set(first) | set(second)):
            found = _first_difference(first.get(key, _MISSING), second.get(key, _MISSING), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return next(filter(None, (_first_difference(a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(first, second)))), None)
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (first, second))
    if numbers and math.isclose(first, second, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
        return None
    if not numbers and first == second:
        return None
    return f"{where.lstrip('.') or 'the record'}: {_shown(first)} at the base, {_shown(second)} now"


def _stage_outs(project: Path) -> dict[str, list[str]]:
    """Each stage of the project's dvc.yaml and its output paths."""
    stages = (yaml.safe_load((project / "dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages", {})
    return {name: [out if isinstance(out, str) else next(iter(out)) for out in entry.get("outs", [])]
            for name, entry in stages.items()}


def _written_by(project: Path, stages: list[str]) -> set[str]:
    """The behaviour files of `project` under the outputs its dvc.yaml gives `stages`."""
    outs = [out for name, paths in _stage_outs(project).items() if name in stages for out in paths]
    return {name for name in _behaviour_files(project) if any(name == out or name.startswith(f"{out}/") for out in outs)}


def differences(base: Path, head: Path, stages: list[str]) -> list[str]:
    """Where two finished tiny projects' `stages` wrote differently: files only one wrote, record
    counts, and the first differing record of each file (VOLATILE fields aside, numbers within
    TOLERANCE). Empty when the same."""
    found = []
    base_files, head_files = _written_by(base, stages), _written_by(head, stages)
    for name in sorted(base_files ^ head_files):
        found.append(f"{name}: only {'at the base' if name in base_files else 'in the working tree'}")
    for name in sorted(base_files & head_files):
        first, second = _records(base / name), _records(head / name)
        if len(first) != len(second):
            found.append(f"{name}: {len(first)} records at the base, {len(second)} now")
            continue
        for number, (a, b) in enumerate(zip(first, second, strict=True), start=1):
            difference = _first_difference(a, b)
            if difference:
                found.append(f"{name}, record {number}: {difference}")
                break
    return found


@contextmanager
def checkout(root: Path, ref: str, dest: Path) -> Iterator[Path]:
    """The tree of commit `ref` at `dest` (a detached git worktree, removed afterwards)."""
    if git("rev-parse", "--verify", f"{ref}^{{commit}}", cwd=root) is None:
        raise RecommitRefused(f"{ref!r} is no commit of the git repository at {root}")
    git("worktree", "add", "--detach", str(dest), ref, cwd=root, check=True)
    try:
        yield dest
    finally:
        git("worktree", "remove", "--force", str(dest), cwd=root)


@dataclass(frozen=True)
class Verdict:
    stages: list[str]  # recordable
    must_run: list[Change]  # what keeps the other stale stages from being recorded
    base: str
    compared: int  # behaviour files compared
    differences: list[str]


def check(root: Path, base: str, work: Path | None = None) -> Verdict:
    """Steps 1 and 2 of the module docstring; `work` (default: a temporary folder) holds the two
    tiny projects, kept there when given."""
    stages, must_run = split(stale(root))
    if not stages:
        return Verdict([], must_run, base, 0, [])
    with tempfile.TemporaryDirectory(prefix="skillrag-recommit-") as tmp:
        folder = work or Path(tmp)
        with checkout(root, base, folder / "base-tree") as tree:
            base_run = run_tiny(tiny_project(tree, folder / "base", root))
        head_run = run_tiny(tiny_project(root, folder / "head"))
        compared = len(_written_by(base_run, stages) | _written_by(head_run, stages))
        return Verdict(stages, must_run, base, compared, differences(base_run, head_run, stages))


def commit(root: Path, stages: list[str]) -> None:
    """Step 3: `dvc commit -f` the stages; an output of theirs that is missing is an ABSENT one and
    keeps the hash dvc.lock holds (any other missing output made its stage a must-run)."""
    from dvc.repo import Repo

    # `Repo.commit(allow_missing=True)` (what `dvc commit` would do with the flag) also saves the run
    # cache, which hashes every output and fails on an absent one: its steps without that save.
    with contextlib.chdir(root), Repo() as repo, repo.lock:  # DVC resolves stage names against the cwd
        for name in stages:
            stage = repo.stage.collect(name)[-1]  # the stage itself, its upstream before it
            stage.save(allow_missing=True, run_cache=False)
            stage.commit(allow_missing=True)
            stage.dvcfile.dump(stage, update_pipeline=False)


def message(verdict: Verdict) -> str:
    """A git commit message for dvc.lock that names the check behind it."""
    return (f"recommit {', '.join(verdict.stages)}: the change leaves every small output of theirs in the tiny pipeline as at "
            f"{verdict.base} ({verdict.compared} files compared, wall-clock fields aside); dvc commit, no re-run")

