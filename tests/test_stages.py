"""What the stages record beside their traces (the stages themselves run in tests/e2e)."""

from pathlib import Path

import pytest

from skillrag.config import load_params
from skillrag.paths import Paths
from skillrag.retrieval.manifest import write_manifest
from skillrag.stages import run_settings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workspace(tmp_path):
    """Inputs of every kind: a model directory, an index with its manifest, a prober, questions."""
    paths = Paths(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    (paths.index / "bm25s").mkdir(parents=True)
    (paths.index / "bm25s" / "data.npz").write_bytes(b"index")
    write_manifest(paths.index)
    paths.probe.mkdir(parents=True)
    (paths.probe / "probe.json").write_text('{"layers": [2]}')
    (paths.probe / "layer_2.safetensors").write_bytes(b"weights")
    questions = paths.question_file("eval", "nq")
    questions.parent.mkdir(parents=True)
    questions.write_text('{"id": "nq-0"}\n')
    return paths, model, questions


def _settings(workspace, method, *overrides):
    paths, model, questions = workspace
    params = load_params(REPO / "params.yaml", overrides=[f"lm.model={model}", "lm.device=cpu", *overrides])
    return run_settings(params, paths, method, [questions])


def _compared(settings):
    return {key: value for key, value in settings.items() if key != "provenance"}


def test_run_settings_follow_what_shapes_a_trace_and_not_speed_knobs(workspace):
    base = _settings(workspace, "skill_rag")
    assert _compared(_settings(workspace, "skill_rag", "lm.threads=1", "lm.batch_size=2")) == _compared(base)
    assert _settings(workspace, "skill_rag", "lm.max_new_tokens=32")["params"]["lm.max_new_tokens"] == 32
    assert _settings(workspace, "skill_rag", "retrieval.k=3")["params"]["retrieval.k"] == 3
    assert _settings(workspace, "skill_rag", "probe.threshold=0.1")["params"]["probe.threshold"] == 0.1
    assert _settings(workspace, "skill_rag", "lm.dtype=bfloat16")["inputs"]["model"]["dtype"] == "bfloat16"
    assert set(base["inputs"]) == {"questions", "model", "prompts", "index", "prober"}

    paths, model, questions = workspace
    (paths.probe / "layer_2.safetensors").write_bytes(b"retrained")
    (model / "model.safetensors").write_bytes(b"other weights")
    questions.write_text('{"id": "nq-1"}\n')
    (paths.index / "bm25s" / "data.npz").write_bytes(b"rebuilt")
    write_manifest(paths.index)
    changed = _settings(workspace, "skill_rag")["inputs"]
    assert all(changed[name] != base["inputs"][name] for name in ("prober", "model", "questions", "index"))

    paths.router.mkdir(parents=True)
    (paths.router / "router.safetensors").write_bytes(b"router")
    assert _settings(workspace, "skill_rag", "methods.router=learned")["inputs"]["router"]


def test_each_method_records_only_what_it_reads(workspace):
    closed_book = _settings(workspace, "no_retrieval")
    assert set(closed_book["inputs"]) == {"questions", "model", "prompts"}
    assert set(closed_book["params"]) == {"lm.max_new_tokens"}
    assert _compared(_settings(workspace, "no_retrieval", "methods.max_rounds=1", "retrieval.k=2")) == _compared(
        closed_book
    )
    single = _settings(workspace, "single_step")
    assert "index" in single["inputs"] and "prober" not in single["inputs"]
    assert "methods.max_rounds" not in single["params"] and single["params"]["retrieval.backend"] == "lucene"
    probing = _settings(workspace, "probing_rag")
    assert "methods.exit_mode" not in probing["params"] and probing["params"]["methods.max_rounds"] == 3


def test_provenance_names_the_code_and_libraries(workspace):
    provenance = _settings(workspace, "no_retrieval")["provenance"]
    assert set(provenance) == {"git_commit", "git_dirty", "torch", "transformers", "skillrag"}
    assert len(provenance["git_commit"]) == 40 and isinstance(provenance["git_dirty"], bool)
    assert provenance["torch"] and provenance["transformers"] and provenance["skillrag"]
