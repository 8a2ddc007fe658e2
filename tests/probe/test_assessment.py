import json

import numpy as np
import pytest
import torch

from skillrag.probe.assessment import (
    binary_metrics,
    calibration_report,
    cut_metrics,
    expected_calibration_error,
    grouped_bootstrap_auroc,
    reliability_plot,
)


def test_ece_is_zero_when_each_bin_is_right_on_average():
    probs = np.array([0.25] * 4 + [0.75] * 4 + [1.0] * 2)
    labels = np.array([1, 0, 0, 0] + [1, 1, 1, 0] + [1, 1])
    assert expected_calibration_error(probs, labels) == pytest.approx(0.0, abs=1e-12)


def test_ece_is_near_zero_on_sampled_calibrated_data():
    rng = np.random.default_rng(0)
    probs = rng.uniform(size=20_000)
    labels = rng.uniform(size=20_000) < probs
    assert expected_calibration_error(probs, labels) < 0.02


def test_ece_of_a_miscalibrated_case_matches_the_hand_computed_value():
    # bin (0.8, 0.9]: 4 rows, mean prob 0.9, half correct -> gap 0.4, weight 4/6
    # bin (0.1, 0.2]: 2 rows, mean prob 0.2, half correct -> gap 0.3, weight 2/6
    probs = np.array([0.9, 0.9, 0.9, 0.9, 0.2, 0.2])
    labels = np.array([1, 1, 0, 0, 0, 1])
    assert expected_calibration_error(probs, labels) == pytest.approx(0.4 * 4 / 6 + 0.3 * 2 / 6)


def test_cut_metrics_count_acceptances_strictly_above_the_cut():
    probs = np.array([0.2, 0.55, 0.65, 0.9])
    labels = np.array([0, 0, 1, 1])
    assert cut_metrics(probs, labels, 0.5) == {"accuracy": 0.75, "balanced_accuracy": 0.75, "acceptance_rate": 0.75}
    assert cut_metrics(probs, labels, 0.6) == {"accuracy": 1.0, "balanced_accuracy": 1.0, "acceptance_rate": 0.5}
    assert cut_metrics(probs, labels, 0.65)["acceptance_rate"] == 0.25
    assert cut_metrics(probs, np.ones(4, dtype=int), 0.6)["balanced_accuracy"] is None


def test_binary_metrics_report_every_named_cut():
    probs = np.array([0.2, 0.55, 0.65, 0.9])
    labels = np.array([0, 0, 1, 1])
    metrics = binary_metrics(probs, labels, {"auto": 0.6, "paper": 0.5})
    assert metrics["auroc"] == 1.0
    assert metrics["at_auto_cut"]["accuracy"] == 1.0 and metrics["at_paper_cut"]["accuracy"] == 0.75


def test_report_covers_layers_ensemble_both_cuts_and_entropy_baseline(trained, make_states):
    features, labels = make_states(200, seed=11)
    entropy = np.where(labels.numpy() == 1, 0.5, 1.5) + np.random.default_rng(0).normal(0, 0.1, 200)
    report = calibration_report(trained, features, labels, entropy, {"auto": 0.7, "paper": 0.5})
    assert json.loads(json.dumps(report)) == report
    assert report["n"] == 200 and report["n_pos"] == int(labels.sum())
    assert sorted(report["per_layer"]) == ["3", "4", "5"]
    assert report["ensemble"]["auroc"] > 0.98
    assert 0.0 <= report["ensemble"]["ece"] <= 1.0
    for metrics in [report["ensemble"], *report["per_layer"].values()]:
        assert {"at_auto_cut", "at_paper_cut"} <= set(metrics)
    scores = trained.score_batch(features).numpy()
    assert report["ensemble"]["at_auto_cut"]["acceptance_rate"] == pytest.approx(np.mean(scores > 0.7))
    assert report["entropy_baseline"]["auroc"] > 0.99
    assert report["notes"] == []


def test_single_class_set_reports_null_auroc_with_a_note(trained, make_states):
    features, _ = make_states(10, seed=12)
    report = calibration_report(trained, features, torch.zeros(10, dtype=torch.long), np.ones(10), {"paper": 0.5})
    assert report["ensemble"]["auroc"] is None
    assert all(metrics["auroc"] is None for metrics in report["per_layer"].values())
    assert report["entropy_baseline"]["auroc"] is None
    assert report["ensemble"]["at_paper_cut"]["accuracy"] is not None
    assert "one class" in report["notes"][0]


def test_entropy_must_have_one_value_per_row(trained, make_states):
    features, labels = make_states(10, seed=13)
    with pytest.raises(ValueError, match="one mean entropy per row"):
        calibration_report(trained, features, labels, np.ones(9), {"paper": 0.5})


@pytest.mark.parametrize("labels", [[0, 1, 1, 0, 1], [1, 1, 1, 1, 1]])
def test_reliability_plot_writes_a_png(tmp_path, labels):
    path = tmp_path / "figures" / "reliability.png"
    reliability_plot(np.array([0.1, 0.4, 0.6, 0.8, 0.95]), np.array(labels), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["reliability.png"]


def test_bootstrap_intervals_resample_questions_and_contain_the_point_estimates():
    rng = np.random.default_rng(4)
    labels = (rng.uniform(size=120) < 0.3).astype(int)
    groups = np.repeat([f"q{i}" for i in range(60)], 2)  # two rows per question
    strong, weak = labels + rng.normal(0, 0.5, 120), labels + rng.normal(0, 3.0, 120)
    out = grouped_bootstrap_auroc({"strong": strong, "weak": weak}, labels, groups, replicates=300, seed=1)
    for name in ("strong", "weak", "difference"):
        lo, hi = out[name]["auroc_ci"]
        assert lo <= out[name]["auroc"] <= hi
    assert out["strong"]["auroc_ci"][0] > out["weak"]["auroc"]  # the stronger score is clearly better
    assert out["difference"]["auroc_ci"][0] > 0 and out["replicates"] == 300
    assert out == grouped_bootstrap_auroc({"strong": strong, "weak": weak}, labels, groups, replicates=300, seed=1)


def test_the_bootstraps_auroc_is_sklearns():
    from sklearn.metrics import roc_auc_score

    from skillrag.probe.assessment import _mann_whitney_auroc

    rng = np.random.default_rng(5)
    labels = (rng.uniform(size=50) < 0.4).astype(int)
    scores = np.round(labels + rng.normal(0, 1, 50), 1)  # with ties
    assert _mann_whitney_auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
