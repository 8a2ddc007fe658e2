"""Reproduce the pipeline one stage at a time, keeping each finished stage: a long CPU run that
may be stopped (a session ending, a machine going back) loses at most the stage in flight, and
that stage resumes where it stopped.

For every stage that `dvc status` reports changed, in dependency order: run the stage's own
command (not `dvc repro`, which deletes a stage's outputs before it runs and so throws away the
finished part of an interrupted resumable stage), record it in dvc.lock with `dvc commit`, push
its cached outputs to the default DVC remote, and commit dvc.lock, the stage's git-tracked
outputs (reports, metrics, figures, timings) and the README's generated results to git. Stops at the first stage that fails.

    python scripts/repro_steps.py               # every changed stage
    python scripts/repro_steps.py --dry-run     # list what would run
    python scripts/repro_steps.py --until train_probe
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import networkx as nx
from dvc.repo import Repo


def stages_in_order(repo: Repo) -> list:
    """Every stage, dependencies first (the graph's edges point from a stage to what it needs),
    otherwise in dvc.yaml's order."""
    written = {stage: n for n, stage in enumerate(repo.index.stages)}
    return list(nx.lexicographical_topological_sort(repo.index.graph.reverse(), key=written.get))


def is_changed(name: str) -> bool:
    """Read afresh: an earlier step has rewritten dvc.lock."""
    return bool(Repo(".").status(targets=[name]))


def git_tracked_outputs(stage) -> list[str]:
    """The outputs DVC does not cache (`cache: false`): they live in git."""
    return [str(out.def_path) for out in stage.outs if not out.use_cache]


def run(command: list[str] | str) -> None:
    shell = isinstance(command, str)
    print("+", command if shell else " ".join(command), flush=True)
    subprocess.run(command, shell=shell, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="list the changed stages and stop")
    parser.add_argument("--until", help="stop after this stage (its DVC name, e.g. train_probe)")
    parser.add_argument("--no-push", action="store_true", help="do not push outputs to the DVC remote")
    parser.add_argument("--no-git", action="store_true", help="do not commit dvc.lock and reports to git")
    args = parser.parse_args()

    repo = Repo(".")
    for stage in stages_in_order(repo):
        name = stage.addressing
        if not is_changed(name):
            print(f"{name}: up to date")
        elif args.dry_run:
            print(f"{name}: would run `{stage.cmd}`")
        else:
            started = time.monotonic()
            run(stage.cmd)
            run(["dvc", "commit", "--force", "--quiet", name])
            if not args.no_push:
                run(["dvc", "push", "--quiet", name])
            if not args.no_git:
                run(["skillrag", "readme"])  # the README's results follow the committed reports
                tracked = ["dvc.lock", "README.md", *git_tracked_outputs(stage)]
                run(["git", "add", *tracked])
                minutes = (time.monotonic() - started) / 60
                message = f"run: stage {name} of the default pipeline finished ({minutes:.1f} min here)"
                # only these paths: whatever else is staged stays out of the run's commit
                subprocess.run(["git", "commit", "--quiet", "-m", message, "--", *tracked], check=False)
        if args.until and name == args.until:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
