"""Stage `train_probe` on a synthetic states directory: train, choose the cut, gate, publish."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from skillrag.config import load_params
from skillrag.paths import Paths
from skillrag.probe.prober import Prober
from skillrag.probe.states import write_shard
from skillrag.quality.gate import GateFailed
from skillrag.stages import train_probe

from tests.probe.conftest import HIDDEN_SIZE, LAYERS

PARAMS_FILE = Path(__file__).resolve().parents[2] / "params.yaml"
FAST = ["probe.hidden=[8]", "probe.lr=0.01", "probe.max_epochs=20", "probe.patience=3"]

IDENTITY = {"name": "tiny-llama", "dtype": "float32", "digest": "d" * 64, "licence": {"spdx": "Apache-2.0", "note": "n"}}


def _write_states(root: Path, make_states, entropy_separates: bool) -> None:
    """300 train and 200 dev rows; mean entropy either carries the label perfectly (a baseline
    the prober, given a weaker signal, cannot reach) or is noise."""
    features, labels = make_states(500, seed=51, signal=0.5 if entropy_separates else 1.5)
    rng = np.random.default_rng(0)
    entropy = (1.0 - labels.numpy()) if entropy_separates else rng.uniform(size=500)
    rows = [
        {
            "id": f"q{i}", "dataset": "nq", "split": "train" if i < 300 else "dev",
            "strategy": "no_retrieval", "prompt_hash": "h", "text": "t", "answer": "a", "em": int(labels[i]),
            "acc": int(labels[i]), "mean_entropy": float(entropy[i]), "prompt_tokens": 10, "new_tokens": 5,
        }
        for i in range(500)
    ]
    states = Paths(root).states
    states.mkdir(parents=True)
    write_shard(states, 0, rows, {"generated_mean": features})
    meta = {"model": "tiny-llama", "identity": IDENTITY, "layers": list(LAYERS), "hidden_size": HIDDEN_SIZE, "fingerprint": "f"}
    (states / "meta.json").write_text(json.dumps(meta))


def _run(root: Path, *overrides: str):
    return train_probe(load_params(PARAMS_FILE, overrides=[*FAST, *overrides]), Paths(root))


def test_the_stage_publishes_the_prober_with_its_dev_cut_and_the_report(tmp_path, make_states):
    _write_states(tmp_path, make_states, entropy_separates=False)
    report = _run(tmp_path)
    paths = Paths(tmp_path)
    record = json.loads((paths.probe / "probe.json").read_text())
    assert record["model"] == "tiny-llama" and record["recipe"] == "weighted"
    assert record["identity"] == IDENTITY  # the model's name, dtype, digest and licence, from the states
    assert record["auto_cut"] == report["cut"]["auto"] and record["paper_cut"] == 0.5
    assert "balanced accuracy" in record["cut_rule"]
    assert json.loads(paths.probe_detail.read_text()) == report
    headline = json.loads(paths.probe_metrics.read_text())  # what `dvc metrics show` prints: narrow
    assert headline["ensemble"] == report["ensemble"] and headline["auto_cut"] == report["cut"]["auto"]
    assert "per_layer" not in headline
    assert report["train"] == {"n": 300, "n_pos": record["n_pos"], "n_fit": record["n_fit"], "n_holdout": 300 - record["n_fit"]}
    assert report["ensemble"]["auroc"] > 0.9 > report["entropy_baseline"]["auroc"]
    for cut in ("auto", "paper"):
        assert set(report["ensemble"][f"at_{cut}_cut"]) == {"accuracy", "balanced_accuracy", "acceptance_rate"}
    assert all(metrics["epochs"] >= 1 for metrics in report["per_layer"].values())
    assert (paths.figures / "probe_reliability.png").stat().st_size > 0
    assert json.loads((paths.reports / "probe_validation.json").read_text())["success"]
    prober = Prober.load(paths.probe)
    assert prober.use_threshold("auto") == report["cut"]["auto"]


def test_the_report_and_the_prober_do_not_depend_on_probe_threshold(tmp_path, make_states):
    _write_states(tmp_path, make_states, entropy_separates=False)
    paths = Paths(tmp_path)
    first = _run(tmp_path)
    files = {p.name: p.read_bytes() for p in paths.probe.iterdir()}
    assert _run(tmp_path, "probe.threshold=0.2") == first
    assert {p.name: p.read_bytes() for p in paths.probe.iterdir()} == files


def test_below_the_entropy_baseline_the_gate_fails_naming_both_and_nothing_is_published(tmp_path, make_states):
    _write_states(tmp_path, make_states, entropy_separates=True)
    paths = Paths(tmp_path)
    paths.probe.mkdir(parents=True)
    (paths.probe / "probe.json").write_text("previous prober")
    with pytest.raises(GateFailed, match=r"ensemble dev AUROC 0\.\d+ is below the mean-token-entropy baseline's 1\.000.*probe\.allow_below_entropy: true"):
        _run(tmp_path)
    assert [p.name for p in paths.probe.iterdir()] == ["probe.json"]
    assert (paths.probe / "probe.json").read_text() == "previous prober"
    assert not paths.probe_metrics.exists() and not (paths.figures / "probe_reliability.png").exists()
    assert not json.loads((paths.reports / "probe_validation.json").read_text())["success"]  # the evidence stays


def test_allow_below_entropy_publishes_it_anyway(tmp_path, make_states):
    _write_states(tmp_path, make_states, entropy_separates=True)
    report = _run(tmp_path, "probe.allow_below_entropy=true")
    assert report["ensemble"]["auroc"] < report["entropy_baseline"]["auroc"]
    assert (Paths(tmp_path).probe / "probe.json").exists()


def test_the_paper_recipe_reports_its_downsampled_rows(tmp_path, make_states):
    _write_states(tmp_path, make_states, entropy_separates=False)
    report = _run(tmp_path, "probe.recipe=paper", "probe.epochs=4")
    assert report["recipe"] == "paper"
    assert report["train"]["n_fit"] == 2 * min(report["train"]["n_pos"], 300 - report["train"]["n_pos"])
    assert report["train"]["n_holdout"] == 0
