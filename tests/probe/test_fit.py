"""Stage `train_probe` on a synthetic states directory: choose the recipe, train, choose the
cuts, gate, publish."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from skillrag.config import load_params
from skillrag.files import write_json
from skillrag.paths import Paths
from skillrag.pipeline.stages.train_probe import train_probe
from skillrag.probe.prober import Prober
from skillrag.probe.state_store import write_meta, write_shard
from skillrag.quality.gate import GateFailed
from tests.probe.conftest import HIDDEN_SIZE, LAYERS

PARAMS_FILE = Path(__file__).resolve().parents[2] / "params.yaml"
FAST = ["probe.cv_c=[0.05]", "probe.cv_hidden=[]", "probe.cv_folds=3", "probe.hidden=[8]", "probe.max_epochs=20", "probe.patience=3"]

IDENTITY = {"name": "tiny-llama", "dtype": "float32", "digest": "d" * 64, "licence": {"spdx": "Apache-2.0", "note": "n"}}
# probing_rag's retry rights 60% of wrong answers and keeps 90% of right ones (retrying pays where
# the prober doubts); skill_rag's rights none and breaks most right ones (retrying hurts).
HELPS = {"rule": "r", "after_wrong": {"n": 20, "right": 12, "rate": 0.6}, "after_right": {"n": 10, "right": 9, "rate": 0.9}, "llm_calls": 1.0}
HURTS = {"rule": "r", "after_wrong": {"n": 20, "right": 0, "rate": 0.0}, "after_right": {"n": 10, "right": 3, "rate": 0.3}, "llm_calls": 2.0}
RETRIES = {"questions": 30, "probing_rag": HELPS, "skill_rag": HURTS}
N_QUESTIONS, N_TRAIN = 250, 150


def _write_states(root: Path, entropy_separates: bool) -> None:
    """250 questions (150 train, 100 dev), each answered closed-book (right on ~25%) and over
    passages (right on ~40%); `answer_last` carries the label along one direction per layer,
    `generated_mean` is noise. Mean entropy either carries the label perfectly (a baseline
    the prober, given a weaker signal, cannot reach) or is noise."""
    rng = np.random.default_rng(0)
    n = 2 * N_QUESTIONS
    labels = np.concatenate([rng.uniform(size=N_QUESTIONS) < 0.25, rng.uniform(size=N_QUESTIONS) < 0.4]).astype(int)
    signal = 0.7 if entropy_separates else 2.0
    y = torch.as_tensor(labels, dtype=torch.float32)[:, None]
    states = {
        "generated_mean": {layer: torch.randn(n, HIDDEN_SIZE) for layer in LAYERS},
        "answer_last": {layer: torch.randn(n, HIDDEN_SIZE) + signal * y * torch.eye(HIDDEN_SIZE)[layer] for layer in LAYERS},
    }
    entropy = (1.0 - labels) if entropy_separates else rng.uniform(size=n)
    rows = []
    for i in range(n):
        question = i % N_QUESTIONS
        rows.append({
            "id": f"q{question}", "dataset": "nq", "split": "train" if question < N_TRAIN else "dev",
            "strategy": "no_retrieval" if i < N_QUESTIONS else "single_step", "prompt_hash": "h", "text": "t",
            "answer": "a", "em": int(labels[i]), "acc": int(labels[i]), "no_answer": 0, "budget_hit": 0,
            "mean_entropy": float(entropy[i]), "prompt_tokens": 10, "new_tokens": 1,
            "logprobs": [-0.1], "entropies": [float(entropy[i])], "pieces": ["a"],
        })
    paths = Paths(root)
    write_shard(paths.states, 0, rows, states)
    write_meta(paths.states, {"model": "tiny-llama", "identity": IDENTITY, "layers": list(LAYERS), "hidden_size": HIDDEN_SIZE, "fingerprint": "f"})
    write_json(paths.retry_rates, RETRIES)


def _run(root: Path, *overrides: str):
    return train_probe(load_params(PARAMS_FILE, overrides=[*FAST, *overrides]), Paths(root))


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit")
    _write_states(root, entropy_separates=False)
    return root, _run(root)


def test_the_stage_chooses_the_informative_pooling_and_publishes_prober_cuts_and_report(published):
    root, report = published
    paths = Paths(root)
    record = json.loads((paths.probe / "probe.json").read_text())
    assert report["recipe"]["pooling"] == record["pooling"] == "answer_last"
    assert report["cv"]["folds"] == 3 and len(report["cv"]["table"]) == 2 * 1 * 2  # poolings x networks x layer subsets
    assert record["model"] == "tiny-llama" and record["identity"] == IDENTITY
    after = report["cuts"]["after_evidence"]
    assert record["cuts"] == {
        "before_retrieval": report["cuts"]["before_retrieval"]["cut"],
        "after_evidence": {"probing_rag": after["probing_rag"]["cut"], "skill_rag": after["skill_rag"]["cut"]},
    }
    assert record["dev_rates"]["after_evidence_reject"] == {m: after[m]["reject_rate"] for m in ("probing_rag", "skill_rag")}
    assert json.loads(paths.probe_detail.read_text()) == report
    headline = json.loads(paths.probe_metrics.read_text())  # what `dvc metrics show` prints: narrow
    assert headline["auroc"] == report["ensemble"]["auroc"] and headline["auroc_ci"] == report["ensemble"]["auroc_ci"]
    assert "per_layer" not in headline and "table" not in json.dumps(headline)
    assert report["ensemble"]["auroc"] > 0.9 > report["entropy_baseline"]["auroc"]
    assert report["vs_entropy"]["verdict"] == "beats" and "better than mean token entropy" in report["vs_entropy"]["text"]
    assert (paths.figures / "probe_reliability.png").stat().st_size > 0
    assert json.loads(paths.validation("probe").read_text())["success"]
    prober = Prober.load(paths.probe)
    assert prober.pooling == "answer_last"
    assert prober.use_threshold("auto") == {"before_retrieval": record["cuts"]["before_retrieval"]}
    assert prober.use_threshold("auto", "skill_rag") == {
        "before_retrieval": record["cuts"]["before_retrieval"], "after_evidence": record["cuts"]["after_evidence"]["skill_rag"]
    }


def test_intervals_are_present_and_contain_the_point_estimates(published):
    _, report = published
    for block in (report["ensemble"], report["entropy_baseline"]):
        lo, hi = block["auroc_ci"]
        assert lo <= block["auroc"] <= hi
    lo, hi = report["vs_entropy"]["difference_ci"]
    assert lo <= report["vs_entropy"]["difference"] <= hi and report["bootstrap"]["replicates"] > 900


def test_each_cut_reports_what_it_does_to_dev_answers_and_never_loses_to_its_null(published):
    _, report = published
    before = report["cuts"]["before_retrieval"]
    helps, hurts = (report["cuts"]["after_evidence"][m] for m in ("probing_rag", "skill_rag"))
    assert before["n"] == helps["n"] == hurts["n"] == N_QUESTIONS - N_TRAIN
    assert before["null"] == "reject_all" and helps["null"] == hurts["null"] == "accept_all"
    assert all(cut["acc"] >= cut["acc_null"] for cut in (before, helps, hurts))
    assert 0 < before["reject_rate"] < 1  # an informative prober accepts some closed-book answers
    # probing_rag's retries right most wrong answers: retrying the ones the prober doubts gains
    assert 0 < helps["reject_rate"] < 1 and helps["acc"] > helps["acc_accept_all"] and not helps["is_null"]
    # skill_rag's retries hurt: the method keeps every single-step answer, and the report says so
    assert hurts["is_null"] and hurts["reject_rate"] == 0.0 and hurts["acc"] == hurts["acc_accept_all"]
    assert any(note.startswith("after_evidence (skill_rag): retrying gains no dev ACC") for note in report["notes"])
    assert report["cuts"]["retries"] == {"probing_rag": HELPS, "skill_rag": HURTS}


def test_the_learning_curve_chooses_the_recipe_again_on_nested_pools_beside_the_logit_baselines(published):
    root, report = published
    curve = report["learning_curve"]
    points = curve["points"]
    assert [p["share"] for p in points] == [0.125, 0.25, 0.5, 1.0]
    assert [(p["questions"], p["answers"]) for p in points] == [(19, 38), (38, 76), (75, 150), (150, 300)]
    assert points[-1]["positives"] == report["train"]["n_pos"]
    full = points[-1]["dev"]["all"]
    assert full["prober"] == {"auroc": report["ensemble"]["auroc"], "auroc_ci": report["ensemble"]["auroc_ci"]}
    assert full["prober_minus_entropy"]["auroc_ci"] == report["vs_entropy"]["difference_ci"]
    assert points[-1]["recipe"] == report["recipe"]
    for point in points[1:]:  # the signal lies in answer_last only: every pool's own CV finds it
        assert point["recipe"]["pooling"] == "answer_last" and point["cv_auroc"] > 0.7
        assert point["dev"]["all"]["prober"]["auroc"] > 0.7
        closed, evidence = point["dev"]["closed_book"], point["dev"]["over_evidence"]
        assert closed["n"] == evidence["n"] == N_QUESTIONS - N_TRAIN and closed["n_pos"] + evidence["n_pos"] == report["n_pos"]
        assert point["dev"]["all"]["prober_minus_entropy"]["auroc_ci"][0] > 0  # entropy is noise: the interval excludes 0
    baselines = curve["baselines"]
    assert set(baselines) == {"all", "closed_book", "over_evidence"}
    assert baselines["all"]["entropy"]["auroc"] == report["entropy_baseline"]["auroc"]
    assert baselines["all"]["min_token_prob"]["auroc"] == 0.5  # every stored token has the same log-probability
    assert (Paths(root).figures / "probe_learning_curve.png").stat().st_size > 0


def test_the_report_and_the_prober_do_not_depend_on_probe_threshold(tmp_path):
    _write_states(tmp_path, entropy_separates=False)
    paths = Paths(tmp_path)
    first = _run(tmp_path, "probe.pooling=answer_last")
    files = {p.name: p.read_bytes() for p in paths.probe.iterdir()}
    assert _run(tmp_path, "probe.pooling=answer_last", "probe.threshold=0.2") == first
    assert {p.name: p.read_bytes() for p in paths.probe.iterdir()} == files


def test_below_the_entropy_baseline_the_gate_fails_in_words_and_nothing_is_published(tmp_path):
    _write_states(tmp_path, entropy_separates=True)
    paths = Paths(tmp_path)
    paths.probe.mkdir(parents=True)
    (paths.probe / "probe.json").write_text("previous prober")
    with pytest.raises(GateFailed, match=r"ranks dev answers worse than mean token entropy.*probe\.allow_below_entropy: true"):
        _run(tmp_path)
    assert [p.name for p in paths.probe.iterdir()] == ["probe.json"]
    assert (paths.probe / "probe.json").read_text() == "previous prober"
    assert not paths.probe_metrics.exists() and not (paths.figures / "probe_reliability.png").exists()
    assert not json.loads(paths.validation("probe").read_text())["success"]  # the evidence stays
    report = _run(tmp_path, "probe.allow_below_entropy=true")
    assert report["vs_entropy"]["verdict"] == "below" and (paths.probe / "probe.json").exists()


def test_the_paper_recipe_stays_selectable_and_reads_the_generated_mean(tmp_path):
    _write_states(tmp_path, entropy_separates=False)
    report = _run(tmp_path, "probe.recipe=paper", "probe.epochs=4", "probe.min_dev_auroc=0", "probe.allow_below_entropy=true")
    assert report["recipe"]["name"] == "paper" and report["recipe"]["pooling"] == "generated_mean" and report["cv"] is None
    assert report["train"]["n_fit"] == 2 * min(report["train"]["n_pos"], 300 - report["train"]["n_pos"])
    assert report["train"]["n_holdout"] == 0


def test_without_retry_rates_the_stage_names_train_router(tmp_path):
    _write_states(tmp_path, entropy_separates=False)
    Paths(tmp_path).retry_rates.unlink()
    with pytest.raises(FileNotFoundError, match="skillrag train-router"):
        _run(tmp_path)
