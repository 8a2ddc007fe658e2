"""The int8-vs-float32 equivalence tables from two answer runs (answer.py): the same dev questions
answered in each precision, paired.

    python experiments/int8-dev/tables.py --float32 experiments/int8-dev/work/float32-dev \\
        --int8 experiments/int8-dev/work/int8 --out experiments/int8-dev/results

Writes `<out>/results.json`, `<out>/results.md` and `<out>/answers.jsonl` (each dev row's two
answers and labels), and reads:
- per strategy (closed-book `no_retrieval`, `single_step` over the passages) and both together:
  strict ACC of each precision, int8's wins and losses against float32 and the exact McNemar p
  (two-sided binomial test on the discordant pairs), the share of byte-identical answers;
- `--committed` (the default run's data/states): whether the float32 rerun reproduces its dev rows
  (answer, generated text, token log-probabilities) byte for byte; the ACC pairs are then taken
  against these committed float32 answers (all dev rows, also those a partial rerun lacks);
- `--probe` (the committed prober, trained on float32 states): its AUROC on the float32 dev states
  and on the int8 dev states (each against its own answers' labels), with question-bootstrap
  intervals and the paired difference; loaded without its model-identity check on purpose;
- when the int8 run holds train rows too (and `--probe` is given): a prober retrained on the int8 states by the stage's own
  code (`skillrag.probe.fit.fit_probe`, params.yaml's probe section) and its int8 dev AUROC.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

REPO = Path(__file__).resolve().parents[2]
STRATEGIES = ("no_retrieval", "single_step")
KEY = ["id", "strategy"]


def paired(float32: pd.DataFrame, int8: pd.DataFrame) -> dict[str, Any]:
    """Strict ACC of each, int8's wins / losses, exact McNemar p and identical answers, over the
    (id, strategy) pairs both hold."""
    both = float32.merge(int8, on=KEY, suffixes=("_float32", "_int8"))
    won = int(((both["acc_int8"] == 1) & (both["acc_float32"] == 0)).sum())
    lost = int(((both["acc_int8"] == 0) & (both["acc_float32"] == 1)).sum())
    return {
        "n": len(both),
        "acc_float32": float(both["acc_float32"].mean()),
        "acc_int8": float(both["acc_int8"].mean()),
        "won": won,
        "lost": lost,
        "mcnemar_p": float(binomtest(won, won + lost, 0.5).pvalue) if won + lost else 1.0,
        "identical_answers": float((both["answer_float32"] == both["answer_int8"]).mean()),
        "identical_texts": float((both["text_float32"] == both["text_int8"]).mean()),
    }


def reproduction(rerun: pd.DataFrame, committed: pd.DataFrame) -> dict[str, Any]:
    """How many of the rerun's rows equal the committed ones byte for byte (answer, text, log-probs)."""
    both = rerun.merge(committed, on=KEY, suffixes=("", "_committed"))
    same = {
        column: int((both[column] == both[f"{column}_committed"]).sum())
        for column in ("answer", "text")
    }
    same["logprobs"] = int(sum(list(a) == list(b) for a, b in zip(both["logprobs"], both["logprobs_committed"])))
    gaps = [float(np.max(np.abs(np.subtract(a, b)))) for a, b in zip(both["logprobs"], both["logprobs_committed"]) if len(a) == len(b) and len(a)]
    return {"rows": len(rerun), "matched": len(both), "identical": same, "max_logprob_gap": max(gaps, default=0.0)}


def bootstrap_auroc_pair(
    first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], groups: np.ndarray,
    replicates: int = 1000, seed: int = 13,
) -> dict[str, Any]:
    """AUROC of two (scores, labels) pairs over the same rows, with 95% intervals from resampling
    questions (`groups`) alike for both, and of their difference (first - second). Replicates
    where either side holds one class only are skipped."""
    rows_of = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    rng = np.random.default_rng(seed)
    draws: list[tuple[float, float]] = []
    for _ in range(replicates):
        rows = np.concatenate([rows_of[i] for i in rng.integers(len(rows_of), size=len(rows_of))])
        if all(len(np.unique(labels[rows])) == 2 for _, labels in (first, second)):
            draws.append(tuple(roc_auc_score(labels[rows], scores[rows]) for scores, labels in (first, second)))
    values = np.array(draws).reshape(-1, 2)

    def interval(column: np.ndarray) -> list[float]:
        return [float(v) for v in np.percentile(column, [2.5, 97.5])]

    points = [float(roc_auc_score(labels, scores)) for scores, labels in (first, second)]
    return {
        "auroc": points,
        "auroc_ci": [interval(values[:, 0]), interval(values[:, 1])],
        "difference": points[0] - points[1],
        "difference_ci": interval(values[:, 0] - values[:, 1]),
        "replicates": len(values),
    }


def probe_params() -> Any:
    """params.yaml's probe section: the recipe the stage retrains with."""
    from skillrag.config import load_params

    return load_params(REPO / "params.yaml").probe


def dev_scores(prober: Any, states: Path, rows: pd.DataFrame) -> np.ndarray:
    from skillrag.probe.state_store import load_features

    return prober.score_batch(load_features(states, rows, prober.pooling)).numpy()


def build(float32_dir: Path, int8_dir: Path, committed_dir: Path | None, probe_dir: Path | None, retries: Path | None) -> dict[str, Any]:
    from skillrag.probe import Prober
    from skillrag.probe.state_store import read_meta, read_rows

    float32 = read_rows(float32_dir).query("split == 'dev'")
    int8_all = read_rows(int8_dir)
    int8 = int8_all.query("split == 'dev'")
    results: dict[str, Any] = {
        "precisions": {"float32": read_meta(float32_dir).get("identity"), "int8": read_meta(int8_dir).get("identity")}
    }
    # ACC is paired against the committed float32 answers when given (the rerun reproduces them,
    # see float32_reproduces_committed), so it covers every int8 row, also where the rerun stopped
    answered = float32
    if committed_dir is not None:
        answered = read_rows(committed_dir).query("split == 'dev'")
        results["float32_reproduces_committed"] = reproduction(float32, answered)
    results["paired_against"] = "committed float32 rows" if committed_dir is not None else "float32 rerun"
    results["paired"] = {
        strategy: paired(answered.query("strategy == @strategy"), int8.query("strategy == @strategy")) for strategy in STRATEGIES
    }
    results["paired"]["both"] = paired(answered, int8)
    # the same rows in the same order on both sides, for the AUROCs
    order = float32[KEY].merge(int8[KEY], on=KEY)
    float32 = order.merge(float32, on=KEY)
    int8 = order.merge(int8, on=KEY)
    labels = (float32["acc"].to_numpy(int), int8["acc"].to_numpy(int))
    groups = float32["id"].to_numpy(str)
    if probe_dir is not None:
        committed = Prober.load(probe_dir)  # no identity check: it is read on int8 states on purpose
        pair = bootstrap_auroc_pair(
            (dev_scores(committed, float32_dir, float32), labels[0]), (dev_scores(committed, int8_dir, int8), labels[1]), groups
        )
        results["committed_prober"] = {"pooling": committed.pooling, "layers": committed.layers, "float32_vs_int8": pair}
    if probe_dir is not None and (int8_all["split"] == "train").any():
        from skillrag.probe.fit import fit_probe

        fitted = fit_probe(int8_dir, retries if retries is not None else REPO / "data/router_traces/retries.json", probe_params())
        retrained = bootstrap_auroc_pair(
            (dev_scores(fitted.prober, int8_dir, int8), labels[1]),
            (dev_scores(committed, int8_dir, int8), labels[1]),
            groups,
        )
        results["int8_retrained_prober"] = {
            "recipe": fitted.report["recipe"],
            "train": fitted.report["train"],
            "vs_committed_on_int8": retrained,
        }
    return results


def markdown(results: dict[str, Any]) -> str:
    names = {"no_retrieval": "closed-book", "single_step": "over 3 passages", "both": "both"}
    lines = [
        "| dev answers | n | ACC float32 | ACC int8 | int8 won / lost | McNemar p (exact) | identical answers | identical texts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, row in results["paired"].items():
        lines.append(
            f"| {names[key]} | {row['n']} | {row['acc_float32']:.1%} | {row['acc_int8']:.1%} | {row['won']} / {row['lost']} "
            f"| {row['mcnemar_p']:.3f} | {row['identical_answers']:.0%} | {row['identical_texts']:.0%} |"
        )
    if "float32_reproduces_committed" in results:
        found = results["float32_reproduces_committed"]
        same = found["identical"]
        lines += ["", (f"float32 rerun against the committed dev rows: {found['matched']} of {found['rows']} rows matched; "
                       f"identical answers {same['answer']}, texts {same['text']}, token log-probs {same['logprobs']} "
                       f"(largest log-prob difference {found['max_logprob_gap']:.2g}).")]
    lines += ["", f"ACC pairs: int8 against the {results['paired_against']}."]

    def auroc(value: float, ci: list[float]) -> str:
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    if "committed_prober" in results:
        pair = results["committed_prober"]["float32_vs_int8"]
        lines += [
            "", "| prober, dev AUROC [95% question bootstrap] | on float32 states | on int8 states | float32 - int8 |", "|---|---|---|---|",
            (f"| committed (trained on float32 states) | {auroc(pair['auroc'][0], pair['auroc_ci'][0])} | "
             f"{auroc(pair['auroc'][1], pair['auroc_ci'][1])} | {auroc(pair['difference'], pair['difference_ci'])} |"),
        ]
    if "int8_retrained_prober" in results:
        retrained = results["int8_retrained_prober"]
        pair = retrained["vs_committed_on_int8"]
        lines.append(
            f"| retrained on int8 states ({retrained['train']['n']} train rows, {retrained['recipe']['network']}, "
            f"{retrained['recipe']['pooling']}, layers {retrained['recipe']['layers']}) | | {auroc(pair['auroc'][0], pair['auroc_ci'][0])} "
            f"| retrained - committed on int8: {auroc(pair['difference'], pair['difference_ci'])} |"
        )
    return "\n".join(lines) + "\n"


def answers(float32_dir: Path, int8_dir: Path) -> pd.DataFrame:
    from skillrag.probe.state_store import read_rows

    columns = [*KEY, "answer", "acc"]
    float32 = read_rows(float32_dir).query("split == 'dev'")[columns]
    int8 = read_rows(int8_dir).query("split == 'dev'")[columns]
    return float32.merge(int8, on=KEY, suffixes=("_float32", "_int8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--float32", type=Path, required=True, help="states folder of the float32 run")
    parser.add_argument("--int8", type=Path, required=True, help="states folder of the int8 run (dev rows; train rows too to retrain)")
    parser.add_argument("--committed", type=Path, default=REPO / "data/states", help="the committed states (rows only needed)")
    parser.add_argument("--probe", type=Path, default=REPO / "data/probe", help="the committed prober")
    parser.add_argument("--retries", type=Path, default=REPO / "data/router_traces/retries.json", help="retry rates the cuts read")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    results = build(args.float32, args.int8, args.committed, args.probe, args.retries)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    (args.out / "results.md").write_text(markdown(results))
    answers(args.float32, args.int8).to_json(args.out / "answers.jsonl", orient="records", lines=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
