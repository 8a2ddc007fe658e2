"""The real scale-out: the `evaluate` flow shards its questions over a 2-worker Dask LocalCluster
(prefect-dask's DaskTaskRunner, through a scheduler address) and writes what one process writes."""

from __future__ import annotations

import pytest
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from skillrag.pipeline import stages
from tests.flows.test_sharding import _headline, _runs, _workspace

pytestmark = pytest.mark.slow  # starts Dask worker processes and a temporary Prefect server

# The harness's server is the one the Dask workers report to (its address travels in the task
# context); without any server each worker process would start a temporary one of its own.


class Fakes(WorkerPlugin):
    """Every worker process answers with the fakes, as the test process does."""

    def setup(self, worker):
        from skillrag.pipeline import runtime
        from tests.fake_cli import PausingLM
        from tests.fakes import CORPUS, OverlapRetriever

        runtime.open_lm = lambda params: PausingLM()
        runtime.open_retriever = lambda params, paths: OverlapRetriever(CORPUS)


def test_evaluate_flow_on_two_dask_workers_equals_one_process(tmp_path, fakes, prefect_server):
    from flows.stages import FLOWS

    single, params = _workspace(tmp_path / "single")
    stages.evaluate.evaluate(params, single)
    stages.summarize.summarize(params, single)
    sharded, _ = _workspace(tmp_path / "sharded")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        client.register_plugin(Fakes())
        FLOWS["evaluate"](params_file=str(sharded.root / "params.yaml"), workers=2, dask_address=cluster.scheduler_address)
        FLOWS["summarize"](params_file=str(sharded.root / "params.yaml"))
    assert _runs(sharded) == _runs(single)
    assert _headline(sharded) == _headline(single)
