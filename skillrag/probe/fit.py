"""Stage `train_probe`: per-layer probers on the train rows of `data/states`, evaluated on dev.

`fit_probe` trains, chooses the acceptance cut on dev and builds the dev report, all in memory;
the stage runs the probe gate on that report and only then `publish`es the prober
(`data/probe/`), its dev metrics (headline numbers in `reports/probe_metrics.json`, a DVC
metrics file; everything, per layer, in `reports/probe_detail.json`) and a reliability plot (`reports/figures/probe_reliability.png`), so a prober that fails its gate
never replaces the one before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from skillrag.config import ProbeParams
from skillrag.errors import DataError
from skillrag.files import write_json
from skillrag.probe.calibration import CUT_RULE, calibration_report, choose_cut, reliability_plot
from skillrag.probe.prober import PAPER_CUT, Prober
from skillrag.probe.states import load_features, read_meta, read_rows
from skillrag.probe.training import train_probers


@dataclass(frozen=True)
class FittedProbe:
    """A trained prober with its dev report and dev scores, not yet written anywhere."""

    prober: Prober
    report: dict[str, Any]
    dev_scores: np.ndarray
    dev_labels: np.ndarray

    def publish(self, probe_dir: Path, metrics_file: Path, detail_file: Path, plot_file: Path) -> None:
        """Write the plot, the full report, the headline metrics, then the prober (what later
        stages read), each atomically."""
        reliability_plot(self.dev_scores, self.dev_labels, plot_file)
        write_json(detail_file, self.report)
        write_json(metrics_file, headline(self.report))
        self.prober.save(probe_dir, {})


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The numbers `dvc metrics show/diff` compares: the ensemble on dev and the entropy baseline
    (per-layer figures and notes stay in the detail report)."""
    return {
        "n": report["n"],
        "n_pos": report["n_pos"],
        "ensemble": report["ensemble"],
        "entropy_auroc": report["entropy_baseline"]["auroc"],
        "auto_cut": report["cut"]["auto"],
    }


def fit_probe(states_dir: Path, params: ProbeParams) -> FittedProbe:
    """Train on split == train, choose the acceptance cut and report on split == dev.

    The cut chosen on dev (`auto_cut`, see CUT_RULE) is stored in probe.json beside the paper's
    0.5 whatever `probe.threshold` says: the threshold picks between them when the prober is loaded.
    """
    meta, rows = read_meta(states_dir), read_rows(states_dir)
    train, dev = rows[rows["split"] == "train"], rows[rows["split"] == "dev"]
    if train.empty or dev.empty:
        raise DataError(f"{states_dir} needs train and dev rows (has {len(train)} train, {len(dev)} dev)")
    prober = train_probers(load_features(states_dir, train), torch.tensor(train["acc"].to_numpy()), params)
    dev_features, dev_labels = load_features(states_dir, dev), dev["acc"].to_numpy().astype(int)
    dev_scores = prober.score_batch(dev_features).numpy()
    auto_cut = choose_cut(dev_scores, dev_labels)
    prober.info.update(
        model=meta["model"],
        identity=meta.get("identity"),  # states extracted before identities were recorded have none
        states_fingerprint=meta["fingerprint"],
        auto_cut=auto_cut,
        paper_cut=PAPER_CUT,
        cut_rule=CUT_RULE,
    )
    report = calibration_report(
        prober, dev_features, torch.as_tensor(dev_labels), dev["mean_entropy"].to_numpy(), {"auto": auto_cut, "paper": PAPER_CUT}
    )
    for layer, epochs in prober.info["epochs"].items():
        report["per_layer"][layer]["epochs"] = epochs
    report["recipe"] = params.recipe
    report["cut"] = {"auto": auto_cut, "paper": PAPER_CUT, "rule": CUT_RULE}
    report["train"] = {  # n_fit: the rows fitted (paper: after downsampling; weighted: n - n_holdout)
        "n": prober.info["n_rows"],
        "n_pos": prober.info["n_pos"],
        "n_fit": prober.info["n_fit"],
        "n_holdout": prober.info["n_holdout"],
    }
    report["by_strategy"] = {
        strategy: {"n": len(group), "n_pos": int(group["acc"].sum())} for strategy, group in rows.groupby("strategy")
    }
    return FittedProbe(prober, report, dev_scores, dev_labels)
