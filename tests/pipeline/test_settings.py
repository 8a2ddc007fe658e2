"""What a run records about retrieval: a BM25 run exactly what it recorded before dense retrieval
existed (the committed run stays valid), a dense or hybrid run its own knobs and identities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillrag.config import load_params
from skillrag.files import write_json
from skillrag.lm import loading
from skillrag.paths import Paths
from skillrag.pipeline.settings import run_settings
from skillrag.pipeline.stages import extract
from skillrag.registry import METHODS
from skillrag.retrieval import index_identity

REPO = Path(__file__).resolve().parents[2]
BM25_KNOBS = {"retrieval.backend", "retrieval.k", "retrieval.passage_words", "retrieval.k1", "retrieval.b"}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """Both fingerprints and a question file; the model's identity stubbed (no weights here) and the
    dense index taken as built (its fingerprint below), so that no index is built from the real corpus."""
    from skillrag.pipeline import runtime

    monkeypatch.setattr(loading, "model_identity", lambda *args: {"name": "stub"})
    monkeypatch.setattr(runtime, "ensure_dense", lambda params, paths, say: None)
    paths = Paths(tmp_path)
    write_json(paths.index_fingerprint, {"corpus_sha256": "corpus"})
    write_json(paths.dense_fingerprint, {"corpus_sha256": "corpus", "encoder": "minilm"})
    paths.question_file("eval", "nq").parent.mkdir(parents=True)
    paths.question_file("eval", "nq").write_text('{"id": "nq-0"}\n')
    return paths


def _settings(paths: Paths, backend: str) -> dict:
    params = load_params(REPO / "params.yaml", overrides=[f"retrieval.backend={backend}", "lm.device=cpu"])
    return run_settings(params, paths, "single_step", [paths.question_file("eval", "nq")])


@pytest.mark.parametrize("backend", ["lucene", "bm25s"])
def test_bm25_settings_carry_no_dense_knob_nor_identity(workspace: Paths, backend: str) -> None:
    settings = _settings(workspace, backend)
    assert {key for key in settings["params"] if key.startswith("retrieval.")} == BM25_KNOBS
    assert settings["inputs"]["index"] == index_identity(workspace.index_fingerprint)  # a digest, as before


def test_hybrid_settings_carry_both_identities_and_the_fusion_knobs(workspace: Paths) -> None:
    settings = _settings(workspace, "hybrid")
    assert {key for key in settings["params"] if key.startswith("retrieval.")} == BM25_KNOBS | {
        "retrieval.fusion_k", "retrieval.fusion_depth"
    }
    assert settings["inputs"]["index"] == {
        "bm25": index_identity(workspace.index_fingerprint), "dense": index_identity(workspace.dense_fingerprint)
    }


def test_dense_settings_carry_the_dense_identity_and_no_bm25_knob(workspace: Paths) -> None:
    settings = _settings(workspace, "dense")
    assert {key for key in settings["params"] if key.startswith("retrieval.")} == {
        "retrieval.backend", "retrieval.k", "retrieval.passage_words"
    }
    assert settings["inputs"]["index"] == {"dense": index_identity(workspace.dense_fingerprint)}


def _committed_settings() -> list[Path]:
    return sorted((REPO / "data" / "runs").glob("*/*.settings.json"))


@pytest.mark.skipif(not _committed_settings(), reason="no committed run in this checkout")
def test_the_committed_runs_settings_are_what_this_code_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every committed BM25 run records the retrieval knobs and index identity this code records
    from params.yaml: the retrieval changes leave the finished run valid."""
    monkeypatch.setattr(loading, "model_identity", lambda *args: {"name": "stub"})
    params, paths = load_params(REPO / "params.yaml"), Paths(REPO)
    for path in _committed_settings():
        method, dataset = path.parent.name, path.name.removesuffix(".settings.json")
        committed = json.loads(path.read_text())
        if method not in METHODS or not METHODS[method].retrieves:
            continue
        now = run_settings(params, paths, method, [paths.question_file("eval", dataset)])
        retrieval = {key: value for key, value in now["params"].items() if key.startswith("retrieval.")}
        assert retrieval == {key: value for key, value in committed["params"].items() if key.startswith("retrieval.")}, path
        assert now["inputs"]["index"] == committed["inputs"]["index"], path


def _extract_pending() -> list[str]:
    """Why the committed extract outputs are not those of the committed inputs (a run in flight
    has re-run prepare or index, or params.yaml changed what extract reads); empty when they are."""
    import yaml

    lock = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    made = {out["path"]: out.get("md5") for stage in lock.values() for out in stage.get("outs", [])}
    why = [f"{dep['path']} changed" for dep in lock["extract"]["deps"] if dep["path"] in made and made[dep["path"]] != dep.get("md5")]
    current = yaml.safe_load((REPO / "params.yaml").read_text())
    for key, value in lock["extract"]["params"]["params.yaml"].items():
        now = current
        for part in key.split("."):
            now = now.get(part) if isinstance(now, dict) else None
        if now != value:
            why.append(f"params.yaml {key}: {value!r} locked, {now!r} now")
    return why


@pytest.mark.skipif(not (REPO / "data" / "states" / "rows" / "meta.json").is_file(), reason="no committed states")
def test_the_committed_extract_fingerprint_is_what_this_code_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """extract's fingerprint covers the retrieval knobs and the index identity: this code, on
    params.yaml and the committed inputs, reproduces the committed one (once the run re-extracts
    when a run in flight has changed extract's inputs: `skillrag repro --dry` lists it pending)."""
    pending = _extract_pending()
    if pending:
        pytest.skip("extract is pending in the committed run: " + "; ".join(pending))
    meta = json.loads((REPO / "data" / "states" / "rows" / "meta.json").read_text())
    monkeypatch.setattr(loading, "model_identity", lambda *args: meta["identity"])
    params, paths = load_params(REPO / "params.yaml"), Paths(REPO)
    inputs = extract._inputs(params, paths)
    questions = extract._questions(params, paths)
    recomputed = extract.fingerprint(inputs, meta["layers"], params.extract.strategies, params.lm.max_new_tokens, questions)
    assert recomputed == meta["fingerprint"]
