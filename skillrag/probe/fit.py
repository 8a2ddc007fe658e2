"""Stage `train_probe`: the prober trained on the train rows of `data/states`, evaluated on dev.

`fit_probe` chooses the recipe (question-grouped CV on train, skillrag.probe.recipe, unless
`probe.recipe` names a fixed one), trains it on all train rows, chooses the acceptance cut of
each decision point (before retrieval; after evidence, per checked method) on dev by what it does
to answers (skillrag.probe.cuts) and builds the dev report
(AUROC with question-bootstrap intervals next to the mean-token-entropy baseline's, the cuts
with the dev ACC and retrieval rate each gives, the learning curve beside the logit baselines,
skillrag.probe.curve), all in memory; the stage runs
the probe gate on that report and only then `publish`es the prober (`data/probe/`), its dev
metrics (headline numbers in `reports/probe_metrics.json`, a DVC metrics file; everything in
`reports/probe_detail.json`), a reliability plot (`reports/figures/probe_reliability.png`) and
the learning curve's (`reports/figures/probe_learning_curve.png`), so a prober that fails its gate never replaces the one before it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from skillrag.config import ProbeParams
from skillrag.errors import DataError
from skillrag.files import write_json
from skillrag.probe.assessment import calibration_report, grouped_bootstrap_auroc, reliability_plot
from skillrag.probe.baselines import baseline_scores
from skillrag.probe.curve import curve_plot, learning_curve
from skillrag.probe.cuts import ACCEPT_ALL, CUT_RULE, REJECT_ALL, Null, choose_cut
from skillrag.probe.prober import AFTER_EVIDENCE, BEFORE_RETRIEVAL, PAPER_CUT, Prober
from skillrag.probe.recipe import Features, cross_validate, fit
from skillrag.probe.state_store import DEFAULT_POOLING, load_features, read_meta, read_rows, stored_poolings
from skillrag.probe.training import train_probers

BOOTSTRAP_REPLICATES = 1000


@dataclass(frozen=True)
class FittedProbe:
    """A trained prober with its dev report and dev scores, not yet written anywhere."""

    prober: Prober
    report: dict[str, Any]
    dev_scores: np.ndarray
    dev_labels: np.ndarray

    def publish(self, probe_dir: Path, metrics_file: Path, detail_file: Path, plot_file: Path, curve_file: Path) -> None:
        """Write the plots, the full report, the headline metrics, then the prober (what later
        stages read), each atomically."""
        reliability_plot(self.dev_scores, self.dev_labels, plot_file)
        curve_plot(self.report["learning_curve"], curve_file)
        write_json(detail_file, self.report)
        write_json(metrics_file, headline(self.report))
        self.prober.save(probe_dir, {})


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The numbers `dvc metrics show/diff` compares: the ensemble on dev with its interval, the
    entropy baseline's, the verdict, the recipe and what each decision point's cut does on dev
    (after evidence: per checked method; the CV table, per-layer figures and the learning curve
    stay in the detail report)."""
    ensemble, entropy = report["ensemble"], report["entropy_baseline"]
    return {
        "n": report["n"],
        "n_pos": report["n_pos"],
        "auroc": ensemble["auroc"],
        "auroc_ci": ensemble["auroc_ci"],
        "ece": ensemble["ece"],
        "entropy_auroc": entropy["auroc"],
        "entropy_auroc_ci": entropy["auroc_ci"],
        "vs_entropy": report["vs_entropy"]["verdict"],
        "pooling": report["recipe"]["pooling"],
        "network": report["recipe"]["network"],
        "layers": len(report["recipe"]["layers"]),
        "cuts": {
            BEFORE_RETRIEVAL: _headline_cut(report["cuts"][BEFORE_RETRIEVAL]),
            AFTER_EVIDENCE: {method: _headline_cut(cut) for method, cut in report["cuts"][AFTER_EVIDENCE].items()},
        },
    }


def _headline_cut(cut: dict[str, Any]) -> dict[str, Any]:
    return {key: cut[key] for key in ("cut", "acc", "reject_rate", "acc_reject_all", "acc_accept_all", "is_null")}


def _poolings(states_dir: Path, params: ProbeParams) -> list[str]:
    if params.pooling != "auto":
        return [params.pooling]
    return stored_poolings(states_dir) if params.recipe == "cv" else [DEFAULT_POOLING]


def _labels(rows: pd.DataFrame) -> torch.Tensor:
    return torch.tensor(rows["acc"].to_numpy().astype(int))


def _select(features: Mapping[str, Features], rows: pd.DataFrame, params: ProbeParams, layers: list[int]) -> tuple[dict[str, Any], dict[str, Any] | None, Prober]:
    """(the recipe, the CV record or None, the prober trained by it on all of `rows`), given the
    rows' states {pooling: {layer: [len(rows), d]}} in the poolings the recipe may read."""
    labels, groups = _labels(rows), rows["id"].tolist()
    if params.recipe != "cv":
        pooling = next(iter(features))
        network = f"mlp {params.hidden}" if params.hidden else "linear (LayerNorm)"
        recipe = {"name": params.recipe, "pooling": pooling, "network": network, "layers": layers}
        return recipe, None, train_probers(features[pooling], labels, params, groups=groups)
    table, chosen = cross_validate(features, rows["acc"].to_numpy(), rows["id"].to_numpy(), params)
    prober = fit(chosen.network, {layer: features[chosen.pooling][layer] for layer in chosen.layers}, labels, groups, params)
    return {"name": "cv", **chosen.to_dict()}, {"folds": len(table[0]["folds"]), "table": table}, prober


def _cv_auroc(cv: dict[str, Any] | None, recipe: dict[str, Any]) -> float | None:
    """The chosen candidate's mean CV AUROC (None without CV)."""
    if cv is None:
        return None
    keys = ("pooling", "network", "layers")
    return next(row["auroc_mean"] for row in cv["table"] if all(row[k] == recipe[k] for k in keys))


def _load_retries(path: Path) -> dict[str, Any]:
    """Each checked method's retry rates (train_router), by method."""
    if not path.exists():
        raise FileNotFoundError(f"no retry rates at {path}: run `skillrag train-router` (or `dvc repro train_router`) first")
    return {method: rates for method, rates in json.loads(path.read_text()).items() if isinstance(rates, dict)}


def _unmeasured(null: Null) -> dict[str, Any]:
    """A decision point with nothing to measure on: its null cut."""
    cut = REJECT_ALL if null == "reject_all" else ACCEPT_ALL
    return {"cut": cut, "acc": None, "reject_rate": 1.0 - cut, "extra_calls": None, "acc_reject_all": None,
            "acc_accept_all": None, "n": 0, "null": null, "acc_null": None, "is_null": True}


def _cuts(dev: pd.DataFrame, scores: np.ndarray, retries: dict[str, Any], call_cost: float) -> tuple[dict[str, Any], list[str]]:
    """Each decision point's cut (skillrag.probe.cuts) and notes. Before retrieval, on the dev
    questions with both a closed-book and a single-step row: accepted, the closed-book ACC;
    rejected, the single-step one (one more LLM call); the null rejects everything. After
    evidence, per checked method, on the single-step rows: accepted, their ACC; rejected, the
    method's own retry's success rate for a right or a wrong answer (train_router), at its
    measured LLM calls; the null accepts everything. A point with nothing to measure on keeps
    its null."""
    notes = []
    frame = dev.assign(score=scores)
    closed, single = (frame[frame["strategy"] == s].set_index("id") for s in ("no_retrieval", "single_step"))
    both = closed.join(single, lsuffix="_closed", rsuffix="_single", how="inner")
    cuts: dict[str, Any] = {"rule": CUT_RULE, "call_cost": call_cost, "retries": retries}
    if both.empty:
        notes.append(f"{BEFORE_RETRIEVAL}: no dev question has both a closed-book and a single-step answer: the cut rejects everything")
        cuts[BEFORE_RETRIEVAL] = _unmeasured("reject_all")
    else:
        cuts[BEFORE_RETRIEVAL] = choose_cut(
            both["score_closed"].to_numpy(), both["acc_closed"].to_numpy(), both["acc_single"].to_numpy(), 1.0, call_cost
        ).to_dict()
        if cuts[BEFORE_RETRIEVAL]["is_null"]:
            notes.append(
                f"{BEFORE_RETRIEVAL}: accepting gains no dev ACC beyond noise: the prober rejects every closed-book answer (always retrieving)"
            )
    cuts[AFTER_EVIDENCE] = {}
    for method, rates in sorted((k, v) for k, v in retries.items() if isinstance(v, dict)):
        cuts[AFTER_EVIDENCE][method], note = _after_evidence(single, rates, call_cost, method)
        notes += note
    return cuts, notes


def _after_evidence(single: pd.DataFrame, rates: dict[str, Any], call_cost: float, method: str) -> tuple[dict[str, Any], list[str]]:
    """One checked method's after-evidence cut from its retry rates (see `_cuts`)."""
    point = f"{AFTER_EVIDENCE} ({method})"
    if "unavailable" in rates:
        return _unmeasured("accept_all"), [f"{point}: no retry evidence ({rates['unavailable']}): it never retries"]
    if single.empty:
        return _unmeasured("accept_all"), [f"{point}: no single-step dev answers: it never retries"]
    notes = []
    right, wrong = rates["after_right"]["rate"], rates["after_wrong"]["rate"]
    if right is None or wrong is None:
        notes.append(
            f"{point}: train_router's retries hold no {'right' if right is None else 'wrong'} single-step answer: "
            "a retry is taken to leave it as it was"
        )
    acc = single["acc"].to_numpy().astype(float)
    after_retry = np.where(acc == 1, 1.0 if right is None else right, 0.0 if wrong is None else wrong)
    calls = rates["llm_calls"] if rates["llm_calls"] is not None else 1.0
    cut = choose_cut(single["score"].to_numpy(), acc, after_retry, calls, call_cost, null="accept_all").to_dict()
    if cut["is_null"]:
        notes.append(f"{point}: retrying gains no dev ACC beyond noise: the method accepts every single-step answer (never retries)")
    return cut, notes


def _vs_entropy(intervals: dict[str, Any]) -> dict[str, Any]:
    """Whether the prober ranks dev answers better than mean token entropy, said in words from
    the paired bootstrap interval of the AUROC difference."""
    diff = intervals["difference"]
    if diff["auroc_ci"] is None:
        verdict, text = "undefined", "AUROC is undefined on dev (one class): the prober cannot be compared with entropy"
    else:
        lo, hi = diff["auroc_ci"]
        span = f"AUROC difference prober - entropy {diff['auroc']:+.3f}, 95% interval [{lo:+.3f}, {hi:+.3f}]"
        if lo > 0:
            verdict, text = "beats", f"the prober ranks dev answers better than mean token entropy ({span})"
        elif hi < 0:
            verdict, text = "below", f"the prober ranks dev answers worse than mean token entropy ({span})"
        else:
            verdict, text = "no_better", f"the prober does not beat mean token entropy on dev: the two are within noise ({span})"
    return {"difference": diff["auroc"], "difference_ci": diff["auroc_ci"], "verdict": verdict, "text": text}


def fit_probe(states_dir: Path, retries_file: Path, params: ProbeParams) -> FittedProbe:
    """Train on split == train, choose the cuts and report on split == dev.

    The cuts chosen on dev are stored in probe.json (`cuts`: the before-retrieval cut, and the
    after-evidence cut per checked method) beside the paper's 0.5 whatever `probe.threshold`
    says: the threshold picks between them when the prober is loaded (for one method).
    """
    meta, rows = read_meta(states_dir), read_rows(states_dir)
    train, dev = rows[rows["split"] == "train"], rows[rows["split"] == "dev"]
    if train.empty or dev.empty:
        raise DataError(f"{states_dir} needs train and dev rows (has {len(train)} train, {len(dev)} dev)")
    retries = _load_retries(retries_file)
    train_features = {pooling: load_features(states_dir, train, pooling) for pooling in _poolings(states_dir, params)}
    dev_features_by: dict[str, Features] = {}

    def dev_features_of(pooling: str) -> Features:
        if pooling not in dev_features_by:
            dev_features_by[pooling] = load_features(states_dir, dev, pooling)
        return dev_features_by[pooling]

    def select(pool: pd.DataFrame) -> tuple[dict[str, Any], float | None, np.ndarray]:
        """A pool of the learning curve: recipe, CV AUROC and dev scores of its own selection."""
        at = np.flatnonzero(train.index.isin(pool.index))
        features = {pooling: {layer: x[at] for layer, x in by_layer.items()} for pooling, by_layer in train_features.items()}
        recipe, cv, model = _select(features, train.iloc[at], params, meta["layers"])
        return recipe, _cv_auroc(cv, recipe), model.score_batch(dev_features_of(recipe["pooling"])).numpy()

    recipe, cv, prober = _select(train_features, train, params, meta["layers"])
    dev_labels = dev["acc"].to_numpy().astype(int)
    dev_features = dev_features_of(recipe["pooling"])
    dev_scores = prober.score_batch(dev_features).numpy()
    cuts, cut_notes = _cuts(dev, dev_scores, retries, params.call_cost)
    prober.info.update(
        model=meta["model"],
        identity=meta.get("identity"),  # states extracted before identities were recorded have none
        states_fingerprint=meta["fingerprint"],
        pooling=recipe["pooling"],
        cuts={
            BEFORE_RETRIEVAL: cuts[BEFORE_RETRIEVAL]["cut"],
            AFTER_EVIDENCE: {method: cut["cut"] for method, cut in cuts[AFTER_EVIDENCE].items()},
        },
        dev_rates={
            f"{BEFORE_RETRIEVAL}_reject": cuts[BEFORE_RETRIEVAL]["reject_rate"],
            f"{AFTER_EVIDENCE}_reject": {method: cut["reject_rate"] for method, cut in cuts[AFTER_EVIDENCE].items()},
        },
        paper_cut=PAPER_CUT,
        cut_rule=CUT_RULE,
        recipe=recipe,
    )
    report = calibration_report(prober, dev_features, torch.as_tensor(dev_labels), dev["mean_entropy"].to_numpy(), {"paper": PAPER_CUT})
    intervals = grouped_bootstrap_auroc(
        {"prober": dev_scores, "entropy": -dev["mean_entropy"].to_numpy(dtype=float)},
        dev_labels, dev["id"].to_numpy(), BOOTSTRAP_REPLICATES, params.seed,
    )
    report["ensemble"]["auroc_ci"] = intervals["prober"]["auroc_ci"]
    report["entropy_baseline"]["auroc_ci"] = intervals["entropy"]["auroc_ci"]
    report["vs_entropy"] = _vs_entropy(intervals)
    report["bootstrap"] = {"replicates": intervals["replicates"], "resampled": "dev questions"}
    for layer, epochs in prober.info.get("epochs", {}).items():
        report["per_layer"][layer]["epochs"] = epochs
    report["recipe"] = recipe
    report["cv"] = cv
    report["cuts"] = cuts
    report["learning_curve"] = learning_curve(
        select, (recipe, _cv_auroc(cv, recipe), dev_scores), train, dev, baseline_scores(dev), BOOTSTRAP_REPLICATES, params.seed
    )
    report["notes"] += [report["vs_entropy"]["text"], *cut_notes]
    report["train"] = {  # n_fit: the rows fitted (paper: after downsampling; weighted: n - n_holdout)
        "n": prober.info["n_rows"],
        "n_pos": prober.info["n_pos"],
        "n_fit": prober.info["n_fit"],
        "n_holdout": prober.info["n_holdout"],
        "questions": int(train["id"].nunique()),
    }
    report["by_strategy"] = {
        strategy: {"n": len(group), "n_pos": int(group["acc"].sum())} for strategy, group in rows.groupby("strategy")
    }
    return FittedProbe(prober, report, dev_scores, dev_labels)
