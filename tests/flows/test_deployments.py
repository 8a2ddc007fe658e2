"""prefect.yaml, read as `prefect deploy` reads it: every deployment's entrypoint loads as a flow
taking its parameters, each runs on the cpu or gpu work pool, the gpu pipeline runs the gpu
profile (which resolves to valid parameters), and the re-evaluations carry their cron schedule."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from functools import reduce

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


def _week(config) -> tuple[list, bool]:
    """The runs a schedule makes in one week (from a Monday, as Prefect's scheduler computes them)
    and whether they force every evaluation."""
    from prefect.server.schemas.schedules import CronSchedule as Scheduler

    made = _schedule_config_to_deployment_schedule(config)
    schedule = made["schedule"]
    assert isinstance(schedule, CronSchedule) and schedule.timezone == "UTC"
    monday = datetime(2026, 1, 5, tzinfo=UTC)
    scheduler = Scheduler(cron=schedule.cron, timezone=schedule.timezone)
    dates = asyncio.run(scheduler.get_dates(start=monday, end=monday + timedelta(days=7)))
    return dates, made.get("parameters", {}).get("force_evaluate", True)


def test_reevaluation_runs_nightly_on_cpu_forced_once_a_week_on_sunday_and_weekly_on_gpu():
    deployments = _deployments()
    cpu = [_week(config) for config in deployments["reevaluate-cpu"]["schedules"]]
    days = [date.date() for dates, _ in cpu for date in dates]
    assert len(days) == len(set(days)) == 7  # every night, once
    forced = [date for dates, force in cpu if force for date in dates]
    assert [date.weekday() for date in forced] == [6]
    gpu = [_week(config) for config in deployments["reevaluate-gpu"]["schedules"]]
    assert [(len(dates), force) for dates, force in gpu] == [(1, True)]


def test_each_pool_deploys_its_own_deployments_by_name():
    from skillrag.pipeline.deploy import deployments_on

    assert deployments_on(REPO / "prefect.yaml", "cpu") == ["pipeline-cpu", "reevaluate-cpu"]
    assert deployments_on(REPO / "prefect.yaml", "gpu") == ["pipeline-gpu", "reevaluate-gpu"]



def test_the_gpu_profile_resolves_to_valid_parameters_at_the_paper_s_scale():
    from skillrag.config import experiment_overrides, load_params

    default, gpu = load_params(REPO / "params.yaml"), load_params(REPO / "params.yaml", "gpu")
    assert gpu.lm.device == "cuda"
    sizes = ("prepare.train_size", "prepare.dev_size", "prepare.eval_size", "retrieval.k", "methods.ircot.max_passages")
    for key in sizes:  # the paper's scale: more questions, passages and steps than two CPU cores run
        assert reduce(getattr, key.split("."), gpu) > reduce(getattr, key.split("."), default), key
    assert gpu.lm.model == default.lm.model and gpu.evaluate.methods == default.evaluate.methods
    assert {'lm.device="cuda"', "prepare.eval_size=500"} <= set(experiment_overrides(REPO / "params.yaml", "gpu"))  # `skillrag exp gpu`
