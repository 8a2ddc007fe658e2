"""prefect.yaml, read as `prefect deploy` reads it: every deployment's entrypoint loads as a flow
taking its parameters, each runs on the cpu or gpu work pool, the gpu pipeline runs the gpu
profile (which resolves to valid parameters), and the re-evaluations carry their cron schedule."""

from __future__ import annotations

import yaml
from prefect.cli.deploy._models import PrefectYamlModel
from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule
from prefect.client.schemas.schedules import CronSchedule
from prefect.flows import load_flow_from_entrypoint

from tests.conftest import REPO


def _deployments():
    raw = yaml.safe_load((REPO / "prefect.yaml").read_text())
    PrefectYamlModel.model_validate(raw)  # the schema `prefect deploy` validates against
    return {d["name"]: d for d in raw["deployments"]}


def test_deployments_load_their_flows_on_cpu_and_gpu_pools():
    deployments = _deployments()
    assert set(deployments) == {"pipeline-cpu", "pipeline-gpu", "reevaluate-cpu", "reevaluate-gpu"}
    for name, deployment in deployments.items():
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        assert flow.name == name.rsplit("-", 1)[0]
        assert deployment["work_pool"]["name"] == name.rsplit("-", 1)[1]
        assert set(deployment.get("parameters", {})) <= set(flow.parameters.properties)
    assert deployments["pipeline-gpu"]["parameters"]["profile"] == "gpu"
    assert deployments["reevaluate-gpu"]["parameters"]["set_params"] == ["lm.device=cuda"]


def test_reevaluation_deployments_carry_their_cron_schedules_nightly_repro_and_weekly_forced():
    crons = {}
    for name in ("reevaluate-cpu", "reevaluate-gpu"):
        for config in _deployments()[name]["schedules"]:
            made = _schedule_config_to_deployment_schedule(config)
            schedule = made["schedule"]
            assert isinstance(schedule, CronSchedule) and schedule.timezone == "UTC"
            crons[(name, schedule.cron)] = made.get("parameters", {}).get("force_evaluate", True)
    assert crons == {("reevaluate-cpu", "0 3 * * 1-6"): False, ("reevaluate-cpu", "0 3 * * 0"): True,
                     ("reevaluate-gpu", "0 4 * * 0"): True}


def test_each_pool_deploys_its_own_deployments_by_name():
    from skillrag.deploy import deployments_on

    assert deployments_on(REPO / "prefect.yaml", "cpu") == ["pipeline-cpu", "reevaluate-cpu"]
    assert deployments_on(REPO / "prefect.yaml", "gpu") == ["pipeline-gpu", "reevaluate-gpu"]



def test_the_gpu_profile_resolves_to_valid_parameters_at_the_paper_s_scale():
    from skillrag.config import experiment_overrides, load_params

    default, gpu = load_params(REPO / "params.yaml"), load_params(REPO / "params.yaml", "gpu")
    assert (gpu.lm.device, gpu.retrieval.k, gpu.methods.ircot.max_passages) == ("cuda", 5, 15)
    assert (gpu.prepare.train_size, gpu.prepare.dev_size, gpu.prepare.eval_size) == (3000, 500, 500)
    assert gpu.lm.model == default.lm.model and gpu.evaluate.methods == default.evaluate.methods
    assert {'lm.device="cuda"', "prepare.eval_size=500"} <= set(experiment_overrides(REPO / "params.yaml", "gpu"))  # `skillrag exp gpu`
