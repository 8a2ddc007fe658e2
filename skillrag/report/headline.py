"""The report's first screen: does the studied method beat its baselines here, and why.

One paragraph and two small tables, every number read from the committed products:

- the primary comparisons (params.yaml `report.primary`, named before the run), Holm-corrected as
  their own family: both ACCs, the difference with its Agresti-Min interval, won / lost, the
  family-wise p, the reading, and the cost of each side (LLM calls and seconds per question);
- what retrieval itself does here: how often single_step's retrieval held a gold passage, and
  single_step against no_retrieval (where found evidence does not raise ACC, what the retrieval
  methods' differences can mean is said);
- the prober's dev AUROC against mean token entropy, what its dev-chosen cuts do, and on the
  evaluation how many closed-book answers it accepted and the LLM calls that saved;
- what each gate and trigger did: the share of questions it sent to retrieval (and, for the
  loops, to a retry) on dev, where its threshold was chosen, and on the evaluation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from skillrag.report.evidence_gain import gain_counts
from skillrag.report.figures import overall_acc
from skillrag.report.inputs import Inputs
from skillrag.report.paired import BASELINE, INDISTINGUISHABLE, PairedResult, holm, reading
from skillrag.report.tables import calls_saved, markdown_table, routed

TRIGGERS = ("flare", "dragin", "entropy_rag")  # thresholds tuned on dev (reports/thresholds.json)
CLASSIFIER = "adaptive_rag"  # the complexity classifier (reports/adaptive_metrics.json)
NO_RETRIEVAL = "no_retrieval"  # Adaptive-RAG's label that answers closed-book


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def per_question(inputs: Inputs, method: str, key: str) -> float:
    """Mean of a trace total (llm_calls, latency_s, ...) over the method's questions."""
    traces = inputs.all_traces(method)
    return sum(float(t["totals"][key]) for t in traces) / len(traces) if traces else float("nan")


def retrieving_rounds(trace: Mapping[str, Any]) -> int:
    return sum(1 for r in trace["rounds"] if (r.get("cost") or {}).get("retrievals", 0) > 0)


def eval_shares(inputs: Inputs, method: str) -> tuple[float | None, float | None]:
    """(share of evaluation questions that retrieved at all, share that retrieved in two or more
    rounds: a retry, a skill, another sentence or step)."""
    traces = inputs.all_traces(method)
    if not traces:
        return None, None
    rounds = [retrieving_rounds(t) for t in traces]
    return sum(r > 0 for r in rounds) / len(rounds), sum(r > 1 for r in rounds) / len(rounds)


def dev_shares(inputs: Inputs, method: str) -> tuple[float | None, float | None, str]:
    """(dev share sent to retrieval, dev share sent to a retry, what decides) for a gated method
    or trigger, from the reports its threshold was chosen in."""
    cuts = inputs.probe.get("cuts", {})
    if method in cuts.get("after_evidence", {}):
        before = (cuts.get("before_retrieval") or {}).get("reject_rate")
        after = cuts["after_evidence"][method].get("reject_rate")
        return before, after, "prober cuts"
    trigger = inputs.thresholds.get("triggers", {}).get(method)
    if trigger:
        return trigger.get("dev_retrieval_rate"), None, f"`{trigger['param']}` = {trigger['value']:.3g}"
    if method == CLASSIFIER and inputs.adaptive.get("dev"):
        predicted: Counter[str] = Counter()
        for row in inputs.adaptive["dev"]["confusion"].values():  # gold label -> predicted label -> count
            predicted.update(row)
        total = sum(predicted.values())
        return (total - predicted[NO_RETRIEVAL]) / total if total else None, None, "complexity classifier"
    return None, None, ""


def gate_rows(inputs: Inputs) -> list[list[str]]:
    rows = []
    for method in inputs.methods:
        dev_retrieve, dev_retry, decides = dev_shares(inputs, method)
        if not decides:
            continue
        retrieved, again = eval_shares(inputs, method)
        rows.append([method, decides, _pct(dev_retrieve), _pct(dev_retry), _pct(retrieved), _pct(again)])
    return rows


def router_choices(inputs: Inputs, method: str) -> str | None:
    chosen = Counter(r["stage"] for t in inputs.all_traces(method) for r in t["rounds"] if routed(r))
    total = sum(chosen.values())
    return ", ".join(f"{skill} {n / total:.0%}" for skill, n in chosen.most_common()) if total else None


def _comparison_sentence(result: PairedResult, adjusted: float, family: int) -> str:
    p, t = result.planned, result.test
    verdict = reading(t, p.first, p.second, adjusted)
    verdict = f"**{verdict}**" if verdict != INDISTINGUISHABLE else f"the two are {verdict}"
    return (f"against {p.second} ({p.scope}, {t.n} questions) {100 * result.first_mean:.1f} vs "
            f"{100 * result.second_mean:.1f} ACC, {100 * t.difference:+.1f} points "
            f"({100 * t.low:+.1f} to {100 * t.high:+.1f}), {t.won} won / {t.lost} lost, Holm p {adjusted:.3f} "
            f"over the {family} primary tests: {verdict}")


def _resolution_sentence(primary: Sequence[PairedResult]) -> str:
    """What this run's size can tell: a small run (the quick profile, a first look) must not be read
    as a finding, and a large one says how fine a difference it resolves."""
    half = max((r.test.high - r.test.low) / 2 for r in primary)
    sizes = sorted({r.test.n for r in primary})
    return (f"At {' / '.join(map(str, sizes))} paired questions a primary interval spans up to ±{100 * half:.1f} points: "
            "a smaller difference cannot be told from noise here.")


def _retrieval_sentence(inputs: Inputs, tests: Sequence[PairedResult]) -> str | None:
    """What retrieval itself does here, from single_step against no_retrieval overall. Where the
    evidence is found and ACC does not rise, the retrieval methods' differences are not evidence
    about retrieval: the quick profile's SmolLM2 finds gold for most questions and answers none
    (issue 45), and a reader of its report must see that on the first screen."""
    result = next((r for r in tests if r.planned.scope == "overall"
                   and {r.planned.first, r.planned.second} == {NO_RETRIEVAL, BASELINE}), None)
    if result is None:
        return None
    t, sign = result.test, (1 if result.planned.first == BASELINE else -1)  # read as single_step minus no_retrieval
    with_passages, closed_book = (result.first_mean, result.second_mean)[::sign]
    low, high = sorted((sign * t.low, sign * t.high))
    gains = gain_counts(inputs).get((BASELINE, "retrieval"), Counter())  # single_step: one retrieving round per question
    found, named = gains["gained"], gains["with_gold"]
    held = (f"{BASELINE}'s retrieval held a gold passage for {found} of the {named} questions that name one "
            f"({found / named:.0%}), and " if named else "")
    text = (f"Retrieval itself: {held}{BASELINE} scores {100 * with_passages:.1f} ACC against "
            f"{NO_RETRIEVAL}'s {100 * closed_book:.1f}, {100 * sign * t.difference + 0.0:+.1f} points "  # + 0.0: no "-0.0"
            f"({100 * low:+.1f} to {100 * high:+.1f}) on {t.n} paired questions.")
    if t.distinguishable:
        return text
    if not named:
        why = "retrieval has not been shown to help here"
    elif found / named >= 0.5:
        why = "the model was given gold evidence for most questions and did not measurably turn it into answers"
    else:
        why = "retrieval found gold evidence for few questions"
    return (text + f" The interval holds 0: {why} (or the questions are too few to show it), so the retrieval "
            "methods' differences here cannot be read as differences in how well they retrieve.")


def _prober_sentence(inputs: Inputs, studied: str) -> str:
    probe = inputs.probe
    ens, entropy = probe.get("ensemble", {}), probe.get("entropy_baseline", {})
    if ens.get("auroc") is None:
        return "The prober's dev report (reports/probe_detail.json) is missing."
    verdict = probe.get("vs_entropy", {}).get("text")
    text = (f"Why: the prober ranks dev answers with AUROC {ens['auroc']:.3f} against {entropy.get('auroc', float('nan')):.3f} "
            f"for mean token entropy" + (f"; {verdict}." if verdict else "."))
    before, after, _ = dev_shares(inputs, studied)
    if before is not None and after is not None:
        if before >= 1 and after >= 1:
            text += (f" Its dev-chosen cuts send every dev answer to retrieval and every answer after evidence to a "
                     f"retry, so the gate decided nothing: {studied} ran as an always-retrieve, always-retry loop and "
                     "what separates it from probing_rag is what a retry does (skills against re-querying), not the prober.")
        else:
            text += f" Its dev-chosen cuts send {before:.0%} of dev answers to retrieval and {after:.0%} to a retry."
    traces = inputs.all_traces(studied)
    accepted = sum(bool(t["rounds"][0].get("accepted")) for t in traces if t["rounds"])
    saved = calls_saved(traces)
    if traces and saved is not None and accepted:
        text += (f" On the evaluation it accepted {accepted} of {len(traces)} closed-book answers, and accepting saved an "
                 f"estimated {saved[1] - saved[0]:.2f} LLM calls per question ({studied} {saved[0]:.2f} against "
                 f"{saved[1]:.2f} for its {saved[2]} never-accepted questions).")
    return text


def headline_section(
    inputs: Inputs, datasets: Sequence[str], primary: Sequence[PairedResult], studied: str,
    exploratory: Sequence[PairedResult] = (),
) -> str:
    """The first section: a paragraph answering the question, the primary comparisons with their
    cost, what retrieval itself does (from the `exploratory` tests), and what each gate did."""
    if not primary:
        return "_None of the primary comparisons (params.yaml `report.primary`) was evaluated._"
    adjusted = holm(primary)
    sentences = [f"**{studied}**: " + "; ".join(_comparison_sentence(r, a, len(primary)) for r, a in zip(primary, adjusted)) + ".",
                 _resolution_sentence(primary)]
    best = max(inputs.methods, key=lambda m: overall_acc(inputs, m, datasets)[0])
    if best != studied:
        sentences.append(f"The highest overall ACC is {best}'s, {100 * overall_acc(inputs, best, datasets)[0]:.1f} "
                         f"against {studied}'s {100 * overall_acc(inputs, studied, datasets)[0]:.1f} "
                         "(their paired test is below).")
    costs = ", ".join(f"{m} {per_question(inputs, m, 'llm_calls'):.2f} calls and {per_question(inputs, m, 'latency_s'):.1f} s"
                      for m in dict.fromkeys([studied, *(r.planned.second for r in primary)]))
    sentences.append(f"Per question it costs {costs}.")
    retrieval = _retrieval_sentence(inputs, [*primary, *exploratory])
    if retrieval:
        sentences.append(retrieval)
    sentences.append(_prober_sentence(inputs, studied))
    choices = router_choices(inputs, studied)
    if choices:
        sentences.append(f"After a rejected answer the router chose {choices}.")
    triggers = [(m, (inputs.thresholds.get("triggers") or {}).get(m, {}).get("dev_retrieval_rate"))
                for m in TRIGGERS if m in inputs.methods]
    tuned = [f"{m} {rate:.0%}" for m, rate in triggers if rate is not None]
    if tuned:
        target = (inputs.thresholds.get("target") or {}).get("source")
        sentences.append(f"The baselines' triggers, tuned on dev{f' to the rate {target} retrieves at' if target else ''}, "
                         f"retrieve on {', '.join(tuned)} of dev questions.")
    dev = (inputs.adaptive.get("dev") or {}) if CLASSIFIER in inputs.methods else {}
    if dev.get("accuracy") is not None:
        same = " (no better than always the majority label)" if dev["accuracy"] <= dev.get("majority_accuracy", -1) else ""
        sentences.append(f"Adaptive-RAG's classifier is right on {dev['accuracy']:.1%} of {dev.get('questions')} dev "
                         f"questions; always `{dev.get('majority_label')}` scores {dev.get('majority_accuracy', float('nan')):.1%}{same}.")
    table = markdown_table(
        ["primary comparison", "scope", "n", "ACC %", "difference, points (95% interval)", "won / lost",
         f"Holm p ({len(primary)} tests)", "reading", "LLM calls / question", "s / question"],
        [[f"{r.planned.first} vs {r.planned.second}", r.planned.scope, str(r.test.n),
          f"{100 * r.first_mean:.1f} vs {100 * r.second_mean:.1f}",
          f"{100 * r.test.difference:+.1f} ({100 * r.test.low:+.1f} to {100 * r.test.high:+.1f})",
          f"{r.test.won} / {r.test.lost}", f"{a:.3f}", reading(r.test, r.planned.first, r.planned.second, a),
          f"{per_question(inputs, r.planned.first, 'llm_calls'):.2f} vs {per_question(inputs, r.planned.second, 'llm_calls'):.2f}",
          f"{per_question(inputs, r.planned.first, 'latency_s'):.1f} vs {per_question(inputs, r.planned.second, 'latency_s'):.1f}"]
         for r, a in zip(primary, adjusted)],
    )
    gates = gate_rows(inputs)
    gate_table = markdown_table(
        ["method", "decided by", "dev: retrieves", "dev: retries", "evaluation: retrieved", "evaluation: retrieved in 2+ rounds"],
        gates) if gates else "_No gated method or trigger was evaluated._"
    return (
        " ".join(sentences) + "\n\n" + table
        + "\n\nWhat each gate and trigger did (dev: where its threshold was chosen; evaluation: these runs):\n\n" + gate_table
        + "\n\n**s / question** is a question's compute time with reused generations charged as if made (see *What each "
        "metric reads*); **Holm p** corrects the primary comparisons as their own family, named in params.yaml "
        "(`report.primary`) before the run; every other test below is exploratory."
    )
