"""What the stages record beside their traces (the stages themselves run in tests/e2e)."""

from pathlib import Path

from skillrag.config import load_params
from skillrag.paths import Paths
from skillrag.stages import run_settings

REPO = Path(__file__).resolve().parents[1]


def test_run_settings_follow_what_shapes_a_trace_and_not_speed_knobs(tmp_path):
    paths = Paths(tmp_path)
    paths.probe.mkdir(parents=True)
    (paths.probe / "probe.json").write_text('{"layers": [2]}')
    (paths.probe / "layer_2.safetensors").write_bytes(b"weights")

    def settings(method, *overrides):
        return run_settings(load_params(REPO / "params.yaml", overrides=list(overrides)), paths, method)

    base = settings("skill_rag")
    assert settings("skill_rag", "lm.threads=1", "lm.batch_size=2", "lm.device=cpu") == base
    assert settings("skill_rag", "lm.max_new_tokens=32")["lm"] != base["lm"]
    assert settings("skill_rag", "retrieval.k=3")["retrieval"] != base["retrieval"]
    assert settings("skill_rag", "probe.threshold=0.1")["probe_threshold"] == 0.1
    assert "probe" not in settings("single_step")  # baselines do not depend on the prober

    (paths.probe / "layer_2.safetensors").write_bytes(b"retrained")
    assert settings("skill_rag")["probe"] != base["probe"]

    paths.router.mkdir(parents=True)
    (paths.router / "router.safetensors").write_bytes(b"router")
    assert "router" not in base and settings("skill_rag", "methods.router=learned")["router"]
