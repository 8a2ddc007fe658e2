"""prefect.yaml: every deployment's entrypoint loads as a flow, each runs on the cpu or gpu work
pool, the gpu pipeline sets lm.device=cuda, and the re-evaluations carry a valid cron schedule."""

from __future__ import annotations

import yaml
from prefect.client.schemas.schedules import CronSchedule
from prefect.flows import load_flow_from_entrypoint

from tests.conftest import REPO


def _deployments():
    return {d["name"]: d for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]}


def test_deployments_load_their_flows_on_cpu_and_gpu_pools():
    deployments = _deployments()
    assert set(deployments) == {"pipeline-cpu", "pipeline-gpu", "reevaluate-cpu", "reevaluate-gpu"}
    for name, deployment in deployments.items():
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        assert flow.name == name.rsplit("-", 1)[0]
        assert deployment["work_pool"]["name"] == name.rsplit("-", 1)[1]
        assert set(deployment.get("parameters", {})) <= set(flow.parameters.properties)
    assert deployments["pipeline-gpu"]["parameters"]["overrides"] == ["lm.device=cuda"]


def test_reevaluation_deployments_carry_their_cron_schedule():
    for name in ("reevaluate-cpu", "reevaluate-gpu"):
        (schedule,) = _deployments()[name]["schedules"]
        cron = CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
        assert cron.cron == schedule["cron"] and cron.timezone == "UTC"
