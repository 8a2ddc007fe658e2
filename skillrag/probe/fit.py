"""Stage `train_probe`: per-layer probers on the train rows of `data/states`, evaluated on dev.

Writes the prober (`data/probe/`), its dev metrics (`reports/probe_metrics.json`, a DVC metrics
file) and a reliability plot (`reports/figures/probe_reliability.png`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from skillrag.config import ProbeParams
from skillrag.files import write_json
from skillrag.probe.calibration import calibration_report, reliability_plot
from skillrag.probe.states import load_features, read_meta, read_rows
from skillrag.probe.training import train_probers


def fit_probe(states_dir: Path, probe_dir: Path, metrics_file: Path, plot_file: Path, params: ProbeParams) -> dict[str, Any]:
    """Train on split == train, report on split == dev; returns the dev report."""
    meta, rows = read_meta(states_dir), read_rows(states_dir)
    train, dev = rows[rows["split"] == "train"], rows[rows["split"] == "dev"]
    if train.empty or dev.empty:
        raise ValueError(f"{states_dir} needs train and dev rows (has {len(train)} train, {len(dev)} dev)")
    prober = train_probers(load_features(states_dir, train), torch.as_tensor(train["acc"].to_numpy()), params)
    prober.save(probe_dir, {"model": meta["model"], "states_fingerprint": meta["fingerprint"]})
    dev_features, dev_labels = load_features(states_dir, dev), torch.as_tensor(dev["acc"].to_numpy())
    report = calibration_report(prober, dev_features, dev_labels, dev["mean_entropy"].to_numpy())
    report["train"] = {"n": len(train), "n_pos": int(train["acc"].sum())}
    report["by_strategy"] = {
        strategy: {"n": len(group), "n_pos": int(group["acc"].sum())} for strategy, group in rows.groupby("strategy")
    }
    write_json(metrics_file, report)
    reliability_plot(prober.score_batch(dev_features).numpy(), dev_labels.numpy(), plot_file)
    return report
