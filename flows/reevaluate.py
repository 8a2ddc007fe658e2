"""Flow `reevaluate`, the scheduled re-evaluation (deployments in prefect.yaml): bring the
artifacts up to date through `skillrag repro`'s runner (skillrag.pipeline.repro: what is stale, and with
`force_evaluate` every evaluate stage and what follows it again; an absent index rebuilt first),
publish the report and metrics as artifacts, and judge the new per-question outcomes against the
committed reports/outcomes.csv on the same questions (skillrag.pipeline.reevaluation). The run ends FAILED
when the outcomes got significantly worse (`reevaluate.alpha`, one-sided, Holm-corrected) or
changed although every recorded input stayed the same (non-deterministic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from flows.artifacts import publish_artifacts
from skillrag import interrupts
from skillrag.config import load_params
from skillrag.paths import Paths
from skillrag.pipeline.reevaluation import bring_up_to_date, committed_outcomes, judge, run_inputs
from skillrag.report.outcomes import outcome_rows


@flow(name="reevaluate")
def reevaluate_flow(
    project: str = ".",
    alpha: float | None = None,
    against: str | None = None,
    force_evaluate: bool = True,
    set_params: list[str] | None = None,
    commit: bool = False,
) -> list[dict[str, Any]]:
    """`project`: the checkout (params.yaml, dvc.yaml, git); `alpha` and `against` default to
    params.yaml's `reevaluate` section; `force_evaluate: false` re-runs only what DVC finds stale
    (the nightly schedule), true every evaluation (the weekly one); `set_params` (e.g.
    ["lm.device=cuda"] on a GPU worker) are written to params.yaml first, as `dvc exp run -S` does;
    `commit`: commit each stage to git as `skillrag repro` does (off: the committed outcomes stay
    the reference). Returns the tests' rows; raises `NonDeterministic` or `Regression` (the run fails)."""
    root = Path(project).resolve()
    params = load_params(root / "params.yaml")
    alpha = params.reevaluate.alpha if alpha is None else alpha
    against = against or params.reevaluate.against
    paths = Paths(root)
    methods, datasets = params.evaluate.methods, params.evaluate.datasets
    committed = task(committed_outcomes, cache_policy=NO_CACHE)(root, against)
    inputs_before = run_inputs(paths.runs)
    try:
        replaced = outcome_rows(paths.runs, methods, datasets)
    except FileNotFoundError:  # a fresh checkout: no traces of its own to check determinism against
        replaced = None
    task(bring_up_to_date, name="repro", cache_policy=NO_CACHE)(root, force_evaluate, set_params or (), commit)
    publish_artifacts(paths, key="reevaluate")
    verdict = judge(committed, replaced, outcome_rows(paths.runs, methods, datasets), inputs_before,
                    run_inputs(paths.runs), alpha)
    summary = "\n".join(f"- {line}" for line in verdict.lines())
    get_run_logger().info(summary)
    create_markdown_artifact(summary, key="reevaluate-verdict", description=f"against {against}")
    if verdict.tests:
        create_table_artifact(verdict.tests, key="reevaluate-tests",
                              description=f"one-sided paired tests against {against}, alpha {alpha}, Holm-corrected")
    verdict.check()
    return verdict.tests


if __name__ == "__main__":
    interrupts.install()
    reevaluate_flow()
