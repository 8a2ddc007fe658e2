"""What every flow shares: loading params the way the CLI does, running a stage and its gate as
Prefect tasks around the library functions in `skillrag.pipeline.stages` (retrying transient failures,
never a gate's verdict), and handing a stage's shards to Dask workers.

Sharding: `extract` and `evaluate` take `shards` and a `ShardMap`; `submit_shards` runs each
shard as a Prefect task on the flow's task runner, which `task_runner` makes a prefect-dask
`DaskTaskRunner` (a local cluster of `workers` processes, or the scheduler at `address`).
`evaluate` hands over the shards of every method of a wave at once (no_retrieval and single_step,
then the methods that start from them), so independent methods run on separate workers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import Task, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from skillrag.config import Params, load_params
from skillrag.paths import Paths
from skillrag.pipeline.repro import StageFailed
from skillrag.pipeline.stages import STAGES, Stage

DASHBOARD = "127.0.0.1:8787"  # the local cluster's dashboard, like every server here: this machine only
RETRIES = 2  # a transient failure (out of memory, I/O, a lost Dask worker) is retried; resumable stages resume
RETRY_DELAY_S = 10
SHARDED = ("extract", "evaluate")  # the stages whose questions can be split across workers


def load(params_file: str | Path, profile: str | None, overrides: Sequence[str]) -> tuple[Params, Paths]:
    params_file = Path(params_file)
    return load_params(params_file, profile, list(overrides)), Paths.for_profile(params_file.resolve().parent, profile)


def is_transient(error: BaseException) -> bool:
    """Worth retrying: out of memory (host or CUDA), an I/O or network failure other than a
    missing file, a Dask worker lost, a stage command killed by the system (`StageFailed.transient`).
    A gate's verdict, bad input or a bug fails at once."""
    if isinstance(error, StageFailed):
        return error.transient
    if isinstance(error, FileNotFoundError):
        return False
    return isinstance(error, OSError | MemoryError) or type(error).__name__ in {"OutOfMemoryError", "KilledWorker"}


def _retry_transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect's `retry_condition_fn`: retry the failed run only when its error is transient."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, BaseException) and is_transient(error)


def retried(fn: Callable[..., Any], name: str) -> Task[..., Any]:
    """`fn` as a Prefect task retried on transient errors only. No Prefect caching: DVC decides
    what is stale, and the resumable stages keep their finished work themselves."""
    return task(
        fn, name=name, cache_policy=NO_CACHE, retries=RETRIES, retry_delay_seconds=RETRY_DELAY_S,
        retry_condition_fn=_retry_transient,
    )


def submit_shards(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """A `skillrag.pipeline.stages.common.ShardMap`: each shard a retried task on the flow's task runner
    (the Dask workers), results in shard order."""
    shard = retried(fn, fn.__name__.replace("_", "-"))
    futures = [shard.submit(*args) for args in calls]
    return [future.result() for future in futures]


def task_runner(workers: int, address: str | None = None, dashboard: str = DASHBOARD) -> Any:
    """A `DaskTaskRunner`: on the Dask scheduler at `address`, else on a local cluster of
    `workers` single-threaded processes (each loads the model once per shard), its scheduler and
    dashboard listening on 127.0.0.1 only (`dashboard`: another address, e.g. ":8787" for every
    interface, when you mean to expose it)."""
    from prefect_dask import DaskTaskRunner

    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": workers, "threads_per_worker": 1, "processes": True, "host": "127.0.0.1",
            "dashboard_address": dashboard,
        }
    )


def run_stage(
    stage: Stage, params: Params, paths: Paths, shards: int | None = None, options: Mapping[str, Any] | None = None
) -> Any:
    """Run the stage then its quality gate as tasks, and log the stage's closing line (the one the
    CLI prints). The stage is retried on transient errors, the gate never: its verdict is final.
    `shards`: a sharded stage (`SHARDED`) runs that many shards on the flow's task runner.
    `options`: more keyword arguments of the stage (evaluate's `methods`)."""
    extra = {} if shards is None else {"shards": shards, "map_shards": submit_shards}
    result = retried(stage.run, stage.name)(params, paths, **extra, **(options or {}))
    if stage.gate is not None:
        task(stage.gate, name=f"gate-{stage.name}", cache_policy=NO_CACHE)(params, paths)
    get_run_logger().info(stage.summary(result, paths))
    return result


@flow(name="sharded-stage", validate_parameters=False)
def _sharded(stage: str, params: Params, paths: Paths, shards: int, options: Mapping[str, Any] | None = None) -> Any:
    return run_stage(STAGES[stage], params, paths, shards, options)


def run_stage_on(
    stage: Stage,
    params: Params,
    paths: Paths,
    workers: int = 1,
    dask_address: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """`run_stage`; a sharded stage's questions go to Dask in `workers` shards when `workers` > 1 (a
    local cluster of that many processes) or a `dask_address` is given (that scheduler's workers):
    in a subflow, since a flow's task runner is fixed when it starts."""
    if workers < 1:
        raise ValueError(f"workers={workers}: at least 1")
    if stage.name not in SHARDED or (workers == 1 and not dask_address):
        return run_stage(stage, params, paths, options=options)
    on_dask = _sharded.with_options(name=f"{stage.name}-on-dask", task_runner=task_runner(workers, dask_address))
    return on_dask(stage.name, params, paths, workers, options)
