"""Flow `reevaluate`, the scheduled re-evaluation (deployments in prefect.yaml): bring the
artifacts up to date with DVC (`dvc pull` when a remote exists, `dvc repro` of what changed, then
evaluation and the stages after it again), publish the report and metrics as artifacts, and
compare every headline metric with the committed reports/metrics.json. The run ends FAILED,
naming each metric, when one is worse by more than the tolerance (`reevaluate.tolerance`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from flows.artifacts import publish_artifacts
from skillrag import interrupts
from skillrag.config import load_params
from skillrag.paths import Paths
from skillrag.reevaluation import bring_up_to_date, check, committed_metrics, compare, table


@flow(name="reevaluate")
def reevaluate_flow(
    project: str = ".",
    tolerance: float | None = None,
    against: str | None = None,
    force_evaluate: bool = True,
    set_params: list[str] | None = None,
) -> list[dict[str, Any]]:
    """`project`: the checkout (params.yaml, dvc.yaml, git); `tolerance` and `against` default to
    params.yaml's `reevaluate` section; `force_evaluate: false` re-runs only what DVC finds stale;
    `set_params` (e.g. ["lm.device=cuda"] on a GPU worker) runs DVC as `dvc exp run -S`.
    Returns every metric's change; raises `Regression` (the run fails) when one is too large."""
    root = Path(project).resolve()
    settings = load_params(root / "params.yaml").reevaluate
    tolerance = settings.tolerance if tolerance is None else tolerance
    before = task(committed_metrics, cache_policy=NO_CACHE)(root, against or settings.against)
    task(bring_up_to_date, name="dvc-repro", cache_policy=NO_CACHE)(root, force_evaluate, set_params or ())
    paths = Paths(root)
    publish_artifacts(paths, key="reevaluate")
    changes = compare(before, json.loads(paths.metrics.read_text(encoding="utf-8")))
    rows = table(changes, tolerance)
    create_table_artifact(rows, key="reevaluate-changes", description=f"against {against or settings.against}, tolerance {tolerance}")
    check(changes, tolerance)
    return rows


if __name__ == "__main__":
    interrupts.install()
    reevaluate_flow()
