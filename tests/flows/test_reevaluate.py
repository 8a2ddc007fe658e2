"""Scheduled re-evaluation: real git and DVC in a throw-away project whose `evaluate` stage writes
reports/metrics.json from a number in a file; the flow fails, naming the metric, when the re-run
is worse than the committed metrics by more than the tolerance, and passes otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillrag.reevaluation import Change, Regression, bring_up_to_date, check, committed_metrics, compare

STAGE = (
    "python -c \"import json,pathlib,yaml; a=float(pathlib.Path('acc.txt').read_text())"
    " * yaml.safe_load(open('scale.yaml'))['scale'];"
    " pathlib.Path('reports').mkdir(exist_ok=True);"
    " pathlib.Path('reports/metrics.json').write_text(json.dumps("
    "{'skill_rag': {'nq': {'acc': a, 'em': 0.25, 'llm_calls': 3.0}}}))\""
)


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path) -> Path:
    """A git + DVC project with one stage, `evaluate`, its metrics committed at acc 0.5."""
    root = tmp_path / "project"
    root.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "test@example.com")
    _git(root, "config", "user.name", "test")
    subprocess.run(["dvc", "init", "-q"], cwd=root, check=True, env=env)
    (root / "acc.txt").write_text("0.5")
    (root / "params.yaml").write_text(yaml.safe_dump({"reevaluate": {"tolerance": 0.05}}))
    (root / "scale.yaml").write_text(yaml.safe_dump({"scale": 1.0}))
    stage = {"cmd": STAGE, "deps": ["acc.txt"], "params": [{"scale.yaml": ["scale"]}], "metrics": [{"reports/metrics.json": {"cache": False}}]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"evaluate": stage}}))
    subprocess.run(["dvc", "repro", "-q"], cwd=root, check=True, env=env)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "metrics")
    return root


def test_compare_names_every_metric_and_only_quality_drops_regress():
    before = {"m": {"d": {"acc": 0.5, "em": 0.4, "no_answer_rate": 0.1, "llm_calls": 2.0, "n": 10}}}
    after = {"m": {"d": {"acc": 0.44, "em": 0.39, "no_answer_rate": 0.2, "llm_calls": 9.0}}}
    changes = {c.key: c for c in compare(before, after)}
    assert set(changes) == {"m/d/acc", "m/d/em", "m/d/no_answer_rate", "m/d/llm_calls", "m/d/n"}
    assert changes["m/d/acc"].worse_by == pytest.approx(0.06)
    assert changes["m/d/no_answer_rate"].worse_by == pytest.approx(0.1)  # a rise is worse
    assert changes["m/d/llm_calls"].worse_by == 0.0  # costs are shown, never fail
    assert changes["m/d/n"].regressed(0.05)  # committed, now missing
    with pytest.raises(Regression) as failure:
        check(list(changes.values()), tolerance=0.05)
    assert "m/d/acc: 0.5 -> 0.44" in str(failure.value) and "m/d/no_answer_rate" in str(failure.value)
    assert "m/d/em" not in str(failure.value)
    check([Change("m/d/acc", 0.5, 0.46)], tolerance=0.05)


def test_dvc_brings_the_metrics_up_to_date_and_git_has_the_committed_ones(project):
    (project / "acc.txt").write_text("0.3")
    ran = bring_up_to_date(project)
    assert ran == ["dvc repro", "dvc repro --force --downstream evaluate"]  # no remote: no pull
    assert json.loads((project / "reports/metrics.json").read_text())["skill_rag"]["nq"]["acc"] == 0.3
    ran = bring_up_to_date(project, set_params=["scale.yaml:scale=0.5"])  # as the gpu deployment sets lm.device
    assert ran == [
        "dvc exp run -S scale.yaml:scale=0.5", "dvc exp run -S scale.yaml:scale=0.5 --force --downstream evaluate"
    ]
    assert json.loads((project / "reports/metrics.json").read_text())["skill_rag"]["nq"]["acc"] == 0.15
    assert committed_metrics(project, "HEAD")["skill_rag"]["nq"]["acc"] == 0.5
    with pytest.raises(FileNotFoundError, match="no committed reports/metrics.json at 'nosuchref'"):
        committed_metrics(project, "nosuchref")


@pytest.mark.slow  # a temporary Prefect server
def test_reevaluate_flow_fails_on_a_drop_beyond_the_tolerance_and_passes_within(project):
    from flows.reevaluate import reevaluate_flow

    (project / "acc.txt").write_text("0.47")  # within reevaluate.tolerance = 0.05
    rows = reevaluate_flow(project=str(project))
    assert {r["metric"]: r["now"] for r in rows}["skill_rag/nq/acc"] == 0.47
    (project / "acc.txt").write_text("0.4")
    with pytest.raises(Regression, match=r"skill_rag/nq/acc: 0\.5 -> 0\.4"):
        reevaluate_flow(project=str(project))
    reevaluate_flow(project=str(project), tolerance=0.2)  # a flow parameter overrides params.yaml
