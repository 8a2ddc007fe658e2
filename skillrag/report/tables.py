"""The report's tables as markdown: answer quality in the paper's Table 1 layout, paired
comparisons of methods on the same questions, costs, the prober gate's acceptance per stage, and
the skills the router chose.

Every cell is computed here from the traces' stored per-question 0/1 scores: the share right
with its 95% Wilson score interval (skillrag.report.paired.wilson), per dataset and pooled over
the in-domain, out-of-distribution and all questions (with the same number of questions per
dataset, as the pipeline evaluates, the pooled share is the mean of the dataset means). Wilson
rather than a percentile bootstrap: at 0 or n right the bootstrap collapses to "0.0 (0.0-0.0)".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from skillrag.report.inputs import Inputs
from skillrag.report.paired import PairedResult, Planned, holm, reading, run_tests, scopes, wilson


def routed(round_: Mapping[str, Any]) -> bool:
    """Whether a router chose this round's skill: its stage is one of the options scored behind
    the choice (`Round.router_scores`). FLARE's, DRAGIN's and IRCoT's rounds carry no scores;
    Adaptive-RAG's "complexity" round scores strategies, not itself."""
    return round_["stage"] in (round_.get("router_scores") or {})


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def scored(inputs: Inputs, method: str, datasets: Sequence[str], metric: str) -> list[float]:
    """`metric` of each of `method`'s scored traces on `datasets`."""
    return [t["scores"][metric] for d in datasets for t in inputs.traces.get(method, {}).get(d, []) if t.get("scores")]


def share_cell(scores: Sequence[float]) -> str:
    """"mean (low–high)" in percent with the Wilson interval; "–" without scores."""
    if not scores:
        return "–"
    right, n = round(sum(scores)), len(scores)
    low, high = wilson(right, n)
    return f"{100 * right / n:.1f} ({100 * low:.1f}–{100 * high:.1f})"


def score_table(inputs: Inputs, metric: str, datasets: Sequence[str], in_domain: Sequence[str]) -> str:
    """One row per method: `metric` per dataset (in-domain sets first), then pooled over the
    in-domain, out-of-distribution and all questions, in percent with 95% Wilson intervals."""
    ind = [d for d in datasets if d in in_domain]
    ood = [d for d in datasets if d not in in_domain]
    groups = [("in-domain", ind), ("OOD", ood), ("overall", [*ind, *ood])]
    header = ["method", *ind, *ood, *(name for name, members in groups if members)]
    rows = []
    for method in inputs.methods:
        cells = [share_cell(scored(inputs, method, [d], metric)) for d in [*ind, *ood]]
        cells += [share_cell(scored(inputs, method, members, metric)) for _, members in groups if members]
        rows.append([method, *cells])
    return markdown_table(header, rows)


def family_table(
    families: Sequence[tuple[str, Sequence[PairedResult]]], keep: Callable[[PairedResult], bool] = lambda _: True
) -> str:
    """Paired ACC tests Holm-adjusted within their family, (family name, results) in order; only
    the rows `keep` accepts are shown (the adjustment still counts every test of the family). The
    reading names a higher method only where the family-wise p is below ALPHA."""
    rows = []
    for family, results in families:
        for result, adjusted in zip(results, holm(results)):
            if not keep(result):
                continue
            planned, test = result.planned, result.test
            rows.append([f"{planned.first} vs {planned.second}", planned.scope, f"{family} ({len(results)})", str(test.n),
                         f"{100 * result.first_mean:.1f}", f"{100 * result.second_mean:.1f}",
                         f"{100 * test.difference:+.1f} ({100 * test.low:+.1f} to {100 * test.high:+.1f})",
                         str(test.won), str(test.lost), f"{test.p_value:.3f}", f"{adjusted:.3f}",
                         reading(test, planned.first, planned.second, adjusted)])
    header = ["comparison", "scope", "family (tests)", "n", "ACC first", "ACC second",
              "difference, points (95% interval)", "won", "lost", "McNemar p", "Holm p in family", "reading"]
    return markdown_table(header, rows)


def paired_table(
    outcomes: pd.DataFrame, pairs: Sequence[tuple[str, str]], datasets: Sequence[str], in_domain: Sequence[str]
) -> tuple[str, int] | None:
    """One row per comparison (first vs second) and scope (each dataset, then the in-domain, OOD
    and overall pools that differ from a dataset), all in one Holm family; with the number of
    tests. None when no pair was evaluated."""
    planned = [Planned(first, second, scope) for first, second in pairs for scope, _ in scopes(datasets, in_domain)]
    results = run_tests(outcomes, planned, datasets, in_domain)
    if not results:
        return None
    return family_table([("all", results)]), len(results)


def cost_table(inputs: Inputs) -> str:
    """Per method, over every evaluated question: mean LLM calls, generated and prompt tokens,
    retrievals, the share of questions that retrieved at all, latency percentiles, and the calls
    the runs made for no one question (Skill-RAG's router calibration, once per run)."""
    header = ["method", "n", "LLM calls", "generated tokens", "prompt tokens", "retrievals",
              "retrieving", "latency p50 (s)", "latency p95 (s)", "run calls (not per question)"]
    rows = []
    for method in inputs.methods:
        traces = inputs.all_traces(method)
        if not traces:
            continue
        totals = {key: np.asarray([t["totals"][key] for t in traces], dtype=float)
                  for key in ("llm_calls", "tokens_out", "tokens_in", "retrievals", "latency_s")}
        p50, p95 = np.percentile(totals["latency_s"], [50, 95])
        rows.append([
            method, str(len(traces)), f"{totals['llm_calls'].mean():.2f}", f"{totals['tokens_out'].mean():.0f}",
            f"{totals['tokens_in'].mean():.0f}", f"{totals['retrievals'].mean():.2f}",
            f"{(totals['retrievals'] > 0).mean():.0%}", f"{p50:.2f}", f"{p95:.2f}",
            str(sum(int(run.get("run_costs", {}).get("llm_calls", 0)) for run in inputs.detail[method].values())),
        ])
    return markdown_table(header, rows)


def timing_table(timings: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Each stage's wall time as recorded when it finished (all its legs when it was resumed)."""
    if not timings:
        return None
    rows = [[stage, f"{t['wall_s'] / 60:.1f}", str(t["legs"]), t["device"], t["finished"]] for stage, t in timings.items()]
    total = sum(t["wall_s"] for t in timings.values()) / 60
    rows.append(["**all stages**", f"**{total:.1f}** ({total / 60:.2f} h)", "", "", ""])
    return markdown_table(["stage", "wall time (min)", "legs", "device", "finished (UTC)"], rows)


def _rate(verdicts: Sequence[bool]) -> str:
    return f"{sum(verdicts) / len(verdicts):.0%} of {len(verdicts)}" if verdicts else "–"


MIN_UNACCEPTED = 20  # fewer never-accepted questions estimate nothing (probing_rag's null cut accepts nearly all)


def calls_saved(traces: Sequence[Mapping[str, Any]]) -> tuple[float, float, int] | None:
    """(LLM calls per question as run, per question among the never-accepted, their number) for a
    gated method's traces; None when fewer than MIN_UNACCEPTED questions went unaccepted. The
    never-accepted questions ran the loop to its end, so their mean estimates what every question
    would cost had the prober accepted nothing; the difference is what accepting saved (an
    estimate: the accepted questions may be easier, and a loop over them could have stopped sooner)."""
    never = [float(t["totals"]["llm_calls"]) for t in traces if not any(r.get("accepted") for r in t["rounds"])]
    if len(never) < MIN_UNACCEPTED:
        return None
    return sum(float(t["totals"]["llm_calls"]) for t in traces) / len(traces), sum(never) / len(never), len(never)


def gate_table(inputs: Inputs) -> str | None:
    """Per gated method (its rounds carry the prober's verdict and its questions end on it, not
    "done" as the fixed baselines, which the prober scores without gating): the share accepted
    before retrieval (the closed-book answer), after evidence (after retrieving with the question)
    and on later rounds, how often the accepted closed-book answers were right, how the questions
    ended, and the LLM calls accepting saved (`calls_saved`). None when no method is gated."""
    from skillrag.metrics import accuracy

    rows = []
    for method in inputs.methods:
        traces = inputs.all_traces(method)
        judged = [r for t in traces for r in t["rounds"] if r.get("accepted") is not None]
        if not judged or all(t["termination"] in ("done", "error") for t in traces):
            continue
        before = [r["accepted"] for t in traces for r in t["rounds"][:1] if r.get("accepted") is not None]
        after = [r["accepted"] for t in traces for r in t["rounds"] if r["stage"] == "retrieval" and r.get("accepted") is not None]
        later = [r["accepted"] for t in traces for r in t["rounds"][1:]
                 if r["stage"] != "retrieval" and r.get("accepted") is not None]
        closed_book = [accuracy(t["rounds"][0]["answer"], t["golds"]) for t in traces if t["rounds"][0].get("accepted")]
        ends = Counter(t["termination"] for t in traces)
        saved = calls_saved(traces)
        rows.append([method, _rate(before), _rate(after), _rate(later), _rate(closed_book),
                     ", ".join(f"{k} {v}" for k, v in sorted(ends.items())),
                     "–" if saved is None else f"{saved[0]:.2f} vs {saved[1]:.2f} (n {saved[2]})",
                     "–" if saved is None else f"{saved[1] - saved[0]:.2f} ({(saved[1] - saved[0]) / saved[1]:.0%})"])
    if not rows:
        return None
    return markdown_table(["method", "accepted before retrieval", "accepted after evidence", "later rounds accepted",
                           "accepted closed-book answers right", "terminations",
                           "LLM calls / question: as run vs never accepted", "calls / question saved by accepting (est.)"], rows)


def skill_table(inputs: Inputs) -> str | None:
    """Per method that routed: how often each skill (exit included) was chosen, and how often the
    round it wrote was right by gold (ACC of that round's answer, stored scores aside; exit writes
    no answer of its own). Only the
    router's decisions count (`routed`): the rounds of FLARE, DRAGIN, IRCoT or Adaptive-RAG are
    none. None when no method routed."""
    from skillrag.metrics import accuracy

    rows = []
    for method in inputs.methods:
        chosen: Counter[str] = Counter()
        right: Counter[str] = Counter()
        for trace in inputs.all_traces(method):
            for round_ in trace["rounds"]:
                if not routed(round_):
                    continue
                chosen[round_["stage"]] += 1
                if round_["stage"] != "exit" and accuracy(round_["answer"], trace["golds"]):
                    right[round_["stage"]] += 1
        total = sum(chosen.values())
        for skill, n in sorted(chosen.items()):
            answers = "–" if skill == "exit" else f"{right[skill]} ({right[skill] / n:.0%})"
            rows.append([method, skill, str(n), f"{n / total:.0%}", answers])
    if not rows:
        return None
    return markdown_table(["method", "skill", "rounds", "share of routing decisions", "its answers right (ACC)"], rows)


def decision_points(cuts: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any] | None]]:
    """The prober's cuts (probe_metrics.json's `cuts`) as (decision point, cut): before retrieval,
    then after evidence for each gated method, which has its own."""
    points: list[tuple[str, Mapping[str, Any] | None]] = [("before_retrieval", cuts.get("before_retrieval"))]
    return points + [(f"after_evidence ({method})", cut) for method, cut in sorted(cuts.get("after_evidence", {}).items())]


def probe_table(probe: Mapping[str, Any]) -> str | None:
    """The prober on dev (reports/probe_detail.json): AUROC with its interval next to the
    entropy baseline's, the recipe, and what each decision point's cut does to dev answers (after
    evidence: per gated method, whose null is never retrying)."""
    if not probe.get("ensemble"):
        return None
    ens, entropy = probe["ensemble"], probe.get("entropy_baseline", {})

    def fmt(x: Any) -> str:
        return "undefined" if x is None else f"{x:.3f}"

    def with_ci(block: Mapping[str, Any]) -> str:
        ci = block.get("auroc_ci")
        return fmt(block.get("auroc")) + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")

    recipe = probe.get("recipe", {})
    verdict = probe.get("vs_entropy", {}).get("text", "")
    head = (f"Dev set: {probe.get('n')} answers, {probe.get('n_pos')} right. Prober AUROC {with_ci(ens)} "
            f"(mean-token-entropy baseline {with_ci(entropy)}; 95% intervals over dev questions), expected "
            f"calibration error {fmt(ens.get('ece'))}. {verdict[:1].upper() + verdict[1:]}. Recipe: "
            f"{recipe.get('name')}, pooling {recipe.get('pooling')}, {recipe.get('network')}, "
            f"{len(recipe.get('layers', []))} layer(s).")
    rows = []
    retries = probe.get("cuts", {}).get("retries", {})
    for point, cut in decision_points(probe.get("cuts", {})):
        reject, everything, nothing = (("retrieves", "always retrieve", "never retrieve") if point == "before_retrieval"
                                       else ("retries", "always retry", "never retry"))
        if cut and cut.get("n"):
            null = " (the null: no gain beyond noise)" if cut.get("is_null") else ""
            method = point.partition("(")[2].rstrip(")")
            calls = 1.0 if point == "before_retrieval" else (retries.get(method, {}).get("llm_calls") or 1.0)
            accepts = 1.0 - cut["reject_rate"]
            rows.append([point, f"{cut['cut']:.3f}{null}", f"{reject} {cut['reject_rate']:.0%}", fmt(cut["acc"]),
                         f"{everything} {fmt(cut['acc_reject_all'])}, {nothing} {fmt(cut['acc_accept_all'])}",
                         f"accepts {accepts:.0%}: {accepts * calls:.2f} calls / question fewer than {everything}"])
    if not rows:
        return head
    return head + "\n\n" + markdown_table(["decision point", "accept iff P(correct) >", "dev share", "dev ACC", "vs", "LLM calls saved"], rows)


def learning_curve_table(probe: Mapping[str, Any]) -> str | None:
    """The prober's learning curve (reports/probe_detail.json, skillrag.probe.curve): per nested
    pool of train questions, the answers and right ones it trained on, the pooling its own CV
    chose, and the dev AUROC with its interval overall and per decision point, each with the
    paired difference prober - entropy; then the logit baselines on the same dev answers."""
    curve = probe.get("learning_curve")
    if not isinstance(curve, Mapping) or not curve.get("points"):
        return None
    populations = list(curve["baselines"])

    def auroc(block: Mapping[str, Any]) -> str:
        ci = block.get("auroc_ci")
        if block.get("auroc") is None:
            return "undefined"
        return f"{block['auroc']:.3f}" + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")

    def difference(block: Mapping[str, Any]) -> str:
        ci = block.get("auroc_ci")
        if block.get("auroc") is None:
            return "undefined"
        return f"{block['auroc']:+.3f}" + ("" if ci is None else f" [{ci[0]:+.3f}, {ci[1]:+.3f}]")

    rows = []
    for point in curve["points"]:
        trained = [str(point["questions"]), f"{point['answers']} ({point['positives']})"]
        if "dev" not in point:
            rows.append([*trained, f"_{point.get('note', 'not measured')}_", *["" for _ in populations for _ in (0, 1)]])
            continue
        chosen = f"{point['recipe']['pooling']}, {point['recipe']['network']}, {len(point['recipe']['layers'])} layer(s)"
        rows.append([*trained, chosen, *(cell for name in populations for cell in (
            auroc(point["dev"][name]["prober"]), difference(point["dev"][name]["prober_minus_entropy"])))])
    headers = ["train questions", "train answers (right)", "recipe chosen by CV"]
    for name in populations:
        base = curve["baselines"][name]
        headers += [f"dev AUROC, {name.replace('_', ' ')} (n {base['n']}, {base['n_pos']} right)", "prober - entropy (paired)"]
    baselines = [name for name in curve["baselines"][populations[0]] if name not in ("n", "n_pos")]
    baseline_rows = [[name.replace("_", " "), *(auroc(curve["baselines"][p][name]) for p in populations)] for name in baselines]
    return (
        markdown_table(headers, rows)
        + "\n\nThe logit baselines on the same dev answers (they do not train):\n\n"
        + markdown_table(["baseline", *(p.replace("_", " ") for p in populations)], baseline_rows)
        + f"\n\nPools and intervals: {curve['rule']}."
    )
