"""Flow `pipeline`: dvc.yaml's pipeline through the same runner as `skillrag repro`
(skillrag.pipeline.repro), one Prefect task per stage: each pending stage's own command, then `dvc commit`
(so dvc.lock records what Prefect ran), `dvc push` when a remote is reachable and one git commit;
an absent cache-only input is restored or rebuilt first, a resumable stage checkpoints its partial
outputs to git. A stage killed by the system (out of memory) is retried and resumes; a stage's own
error, a gate's verdict included (each stage command runs its gate), fails at once. Ends by
publishing the report, the metrics table and the Data Docs link as Prefect artifacts.

Dask sharding of extract and evaluate stays with the single-stage flows (flows/stages.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow, get_run_logger

from flows.artifacts import publish_artifacts
from flows.common import retried
from skillrag import interrupts
from skillrag.config import experiment_overrides
from skillrag.paths import Paths
from skillrag.pipeline.repro import Runner, apply_params, deadline_of, parse_duration


@flow(name="pipeline")
def pipeline_flow(
    project: str = ".",
    profile: str | None = None,
    targets: Sequence[str] = (),
    budget: str | None = None,
    checkpoint: str = "20m",
    set_params: Sequence[str] = (),
    push: bool = True,
) -> list[str]:
    """`project`: the checkout (params.yaml, dvc.yaml, git); `targets`: run only these stages and
    what they depend on (dvc.yaml names, e.g. ["train_probe"]; none: every stage); `budget`
    (e.g. 2h30m) starts only what fits, as `skillrag repro --budget` does. `profile` (e.g. gpu) and `set_params` (e.g. ["lm.device=cuda"])
    are written to params.yaml as `skillrag exp` / `dvc exp run -S` pass them, and the run is then
    the workspace's experiment: nothing is committed to git. Returns the keys of the artifacts
    published."""
    root = Path(project).resolve()
    overrides = [*(experiment_overrides(root / "params.yaml", profile) if profile else ()), *set_params]
    if overrides:
        apply_params(root, overrides)
    log = get_run_logger()
    runner = Runner(root, checkpoint_s=parse_duration(checkpoint), deadline=deadline_of(budget),
                    targets=targets, git=not overrides, push=push, echo=log.info)
    ran = runner.run(run_stage=lambda name: retried(runner.run_stage, name)(name))
    log.info(f"pipeline: {len(ran)} stage(s) run: {', '.join(ran) or 'none'}")
    return publish_artifacts(Paths(root))


if __name__ == "__main__":
    interrupts.install()
    pipeline_flow()
