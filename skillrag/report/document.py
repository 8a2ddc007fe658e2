"""reports/report.md: one markdown document a reviewer can read on its own (in a pull request,
without running anything). Its first screen answers the question (skillrag.report.headline: the
primary comparisons, their cost, and why); then the detail: answer quality in the paper's Table 1
layout, the studied method paired against every method, the side experiments, costs, the gate
and the skills, the prober's calibration, the failure space, case studies, data quality, what
each metric reads, the provenance and the change against a base ref. Its figures are drawn by the
same stage (skillrag.report.figures)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from skillrag.config import DATASETS, Params
from skillrag.paths import Paths
from skillrag.registry import studied_method
from skillrag.report.cases import choose_cases, render_case
from skillrag.report.data_docs import data_docs_index
from skillrag.report.evidence import evidence_section
from skillrag.report.evidence_gain import evidence_gain_table
from skillrag.report.experiments import experiments_section
from skillrag.report.figures import ACCURACY_COST, ACCURACY_OVERALL, RELIABILITY
from skillrag.report.headline import headline_section
from skillrag.report.inputs import Inputs, load_inputs
from skillrag.report.loop import loop_section
from skillrag.report.outcomes import outcome_frame
from skillrag.report.paired import (
    ALPHA,
    BASELINE,
    INDISTINGUISHABLE,
    PairedResult,
    Planned,
    planned_tests,
    run_tests,
)
from skillrag.report.sources import model_line, provenance_section
from skillrag.report.tables import (
    cost_table,
    family_table,
    gate_table,
    learning_curve_table,
    markdown_table,
    probe_table,
    score_table,
    skill_table,
    timing_table,
)

CASE_METHOD = studied_method()  # skillrag.registry: the paper's own method

METRICS_READ = """\
Every score reads the final answer a method extracted, never its reasoning (skillrag.metrics):

- **EM**: the SQuAD-normalised strict answer (the text after `Answer:`) equals a normalised gold answer.
- **ACC**: a gold answer's tokens occur as a contiguous run of the answer's tokens (whole words: "no" does
  not match "Norway"). An empty answer and the abstain answer never score.
- **Intervals**: a share right (ACC, EM) has the 95% Wilson score interval; in-domain, OOD and overall pool
  their datasets' questions. A paired difference has the 95% Agresti-Min interval (1/2 added to each cell of
  the 2x2 table): neither is ever zero-width, not even at 0 right or at no discordant question.
- **In-domain** datasets are those the prober was trained on (`prepare.train_datasets`); the others are
  out-of-distribution (OOD).
- **LLM calls**: every generate, likelihood or route-and-write call counts once, however many prompts it
  batches; **generated / prompt tokens** are those calls' new and prompt tokens; **retrievals** count
  retriever queries; **retrieving** is the share of questions with at least one retrieval. Calls answered
  from reuse (the no_retrieval / single_step generations the gated methods start from, or `evaluate`'s
  memory) are charged as if made, so methods compare fairly. **Run calls** are made once per run for no one
  question (Skill-RAG's router calibration).
- **Latency** is what a question's calls cost alone: a reused generation is charged the compute time it took
  when it was made, a row of a batched call an equal share of that call, anything else the time waited (so it
  includes no wait for other questions' batches). Compare it between methods of one run, not across machines.
  **Wall time per stage** is the clock time each DVC stage took on the machine named there.
- **Accepted before retrieval / after evidence**: the share of closed-book answers, and of answers after
  retrieving with the question, that the prober accepted; **later rounds**: the share of re-retrieval rounds
  accepted.
- **Prober calibration**: dev AUROC of the per-layer ensemble, expected calibration error (10 bins), and
  accuracy / balanced accuracy / acceptance at the dev-chosen cut and at the paper's P > 0.5.
- **Failure space**: see the section's own note."""


def _link(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target.resolve(), base.resolve())).as_posix()


def _figure(paths: Paths, name: str, title: str, base: Path) -> str:
    file = paths.figures / name
    return f"![{title}]({_link(file, base)})" if file.is_file() else f"_{title}: `{name}` was not produced._"


def _header(inputs: Inputs, datasets: Sequence[str]) -> str:
    counts = ", ".join(
        f"{d} {max((by.get(d, {}).get('n', 0) for by in inputs.detail.values()), default=0)}" for d in datasets
    )
    return (
        "# Skill-RAG evaluation report\n\n"
        f"Methods: {', '.join(f'`{m}`' for m in inputs.methods)}. Questions per dataset: {counts}. "
        f"Model: {model_line(inputs)}.\n\n"
        "Generated by `skillrag report` (DVC stage `report`) from `reports/metrics_detail.json`, the traces in "
        "`data/runs/`, the prober's and router's reports and `reports/analysis.json`; rebuild with `dvc repro`."
    )


def _tests(params: Params, inputs: Inputs, datasets: Sequence[str]) -> tuple[list[PairedResult], list[PairedResult]]:
    """(primary, exploratory) paired ACC tests: params.yaml's `report.primary`, and the rest of
    skillrag.report.paired.planned_tests."""
    primary = [Planned(c.first, c.second, c.scope) for c in params.report.primary]
    first, rest = planned_tests(inputs.methods, primary, CASE_METHOD)
    outcomes = outcome_frame(t for m in inputs.methods for t in inputs.all_traces(m))
    in_domain = params.prepare.train_datasets
    return run_tests(outcomes, first, datasets, in_domain), run_tests(outcomes, rest, datasets, in_domain)


def _paired(primary: Sequence[PairedResult], exploratory: Sequence[PairedResult]) -> str:
    if not primary and not exploratory:
        return "_No pair of the compared methods was evaluated._"
    def studied(result: PairedResult) -> bool:
        return result.planned.first == CASE_METHOD

    others = [r for r in exploratory if not studied(r)]
    return (
        "Strict ACC of two methods on the same questions (first minus second, in points), with the 95% Agresti-Min "
        "interval of the paired difference; **won** / **lost** count the questions only the first / only the second "
        "got right; **McNemar p** is the exact two-sided test on those questions. Two families, each Holm-corrected on "
        "its own: the **primary** comparisons, named in params.yaml (`report.primary`) before the run, and every other "
        f"test, **exploratory** ({len(exploratory)} tests, both tables below: at p < {ALPHA} about "
        f"{ALPHA * len(exploratory):.1f} would come out significant by chance alone if no method differed). The "
        f"**reading** calls one method higher only where the family-wise p is below {ALPHA}; elsewhere the two are "
        f"{INDISTINGUISHABLE}.\n\n"
        f"**{CASE_METHOD} against every method**, per scope:\n\n"
        + family_table([("primary", primary), ("exploratory", exploratory)], keep=lambda r: r in primary or studied(r))
        + (f"\n\n**Every other method against {BASELINE}** (exploratory, the same family):\n\n"
           + family_table([("exploratory", exploratory)], keep=lambda r: not studied(r)) if others else "")
    )


def _gate_and_skills(inputs: Inputs) -> str:
    parts = []
    gates = gate_table(inputs)
    parts.append(gates if gates else "_No method's rounds carry a prober verdict._")
    skills = skill_table(inputs)
    parts.append(("Skills the router chose (each routing decision after a rejected answer):\n\n" + skills)
                 if skills else "_No method routed to a skill._")
    router = inputs.router
    if router:
        learned = (f"trained on {router.get('examples')} failure states, {router.get('cv_folds')}-fold accuracy "
                   f"{router.get('cv_accuracy')} (most frequent label {router.get('majority_accuracy')})"
                   if router.get("trained") else f"not trained: {router.get('reason', 'see reports/router_metrics.json')}")
        parts.append(f"Learned router (`methods.router: learned`; `train_router`): {learned}.")
        as_run = router.get("router_as_run")
        if as_run and as_run.get("states"):
            parts.append(
                f"The router as configured (`methods.router: {as_run['router']}`) on the {as_run['states']} explored train "
                f"failure states (skill_rag's own first retries): its choice fixed {as_run['fixed']} of the "
                f"{as_run['fixable']} states some skill fixed; accuracy {as_run['accuracy']:.2f} (its choice fixed the "
                f"state, or exit where no skill did) against {as_run['majority']['accuracy']:.2f} for always "
                f"`{as_run['majority']['label']}`; chosen {', '.join(f'{k} {v}' for k, v in as_run['chosen'].items())} "
                "(reports/router_metrics.json holds the confusion table)."
            )
        held_out = (router.get("prompt_router") or {}).get("fitted_cv_choices")
        if held_out:
            parts.append(
                f"The prompt router's fitted label offsets on states their fit did not see (cross-validated): fixed "
                f"{held_out['fixed']} of {held_out['fixable']}, accuracy {held_out['accuracy']:.2f}; chosen "
                f"{', '.join(f'{k} {v}' for k, v in held_out['chosen'].items())}. The offsets maximise the states "
                "fixed, then the stops where nothing would have (skillrag.skills.calibration)."
            )
    return "\n\n".join(parts)


def _failure_space(inputs: Inputs, paths: Paths, base: Path) -> str:
    a = inputs.analysis
    if not a:
        return "_`reports/analysis.json` is missing: run `skillrag analyze`._"
    sep = a.get("separability", {})
    if sep.get("probe_accuracy") is not None:
        measured = (f"a {sep['folds']}-fold linear probe reads the chosen skill from the state with accuracy "
                    f"{sep['probe_accuracy']:.2f} ± {sep['probe_accuracy_std']:.2f}, against {sep['majority_accuracy']:.2f} "
                    f"for always the most frequent skill and {sep['chance_accuracy']:.2f} by chance"
                    + (f"; silhouette of the skill labels {sep['silhouette']:.2f}" if sep.get("silhouette") is not None else ""))
    else:
        measured = "separability was not measured"
    rows = [[skill, str(n), str(a.get("fixed_by_skill", {}).get(skill, 0))] for skill, n in a.get("by_skill", {}).items()]
    notes = "".join(f"\n- {note}" for note in a.get("notes", []))
    return (
        "Questions still wrong (by ACC) after skill_rag's closed-book and retrieval rounds, whose retrieval answer "
        "the prober rejected: each point is that answer's hidden state (mean over the prober's layers), coloured by "
        "the skill the router then chose and by whether that skill's answer was right. "
        f"{a.get('failure_states', 0)} failure states in {a.get('traces', 0)} traces ({a.get('with_state', 0)} with a "
        f"vector; {a.get('rejected_but_right', 0)} rejected answers were in fact right and are not failures); {measured}."
        + (notes and f"\n\nNotes:{notes}")
        + ("\n\n" + markdown_table(["skill chosen", "failure states", "fixed by it"], rows) if rows else "")
        + "\n\n" + _figure(paths, "failure_space.png", "failure space", base)
        + "\n\n" + _figure(paths, "failure_separability.png", "separability", base)
    )


def _cases(inputs: Inputs, count: int) -> str:
    method = CASE_METHOD if CASE_METHOD in inputs.traces else next(iter(inputs.traces), None)
    chosen = choose_cases(inputs.all_traces(method), count) if method and count else []
    if not chosen:
        return "_No traces to show._"
    return "\n\n".join(render_case(i + 1, kind, trace) for i, (kind, trace) in enumerate(chosen))


def _data_quality(inputs: Inputs, paths: Paths, base: Path) -> str:
    rows = []
    for gate, result in sorted(inputs.gates.items()):
        checks = result.get("checks", {})
        expectations = [r for c in checks.values() for r in c.get("results", [])]
        failed = [r["expectation_config"]["type"] for r in expectations if not r.get("success")]
        rows.append([gate, "passed" if result.get("success") else "FAILED", str(len(checks)), str(len(expectations)),
                     ", ".join(failed) or "–"])
    index = data_docs_index(paths)
    docs = (f"Every result rendered as Great Expectations Data Docs: [{_link(index, base)}]({_link(index, base)}) "
            "(DVC-tracked, `dvc pull` fetches it)." if index.is_file() else "_Data Docs were not built._")
    table = markdown_table(["gate", "result", "checks", "expectations", "failed"], rows) if rows else "_No gate results found._"
    return table + "\n\n" + docs


def render_report(params: Params, paths: Paths, out: Path, change: str, change_first: bool = False) -> str:
    """The report as markdown, its links relative to `out`'s folder; `change` is the body of "Change
    against the base" (skillrag.report.diff), first when `change_first`, as in a PR comment. It links
    the report's figures (skillrag.report.figures.draw_report_figures draws them)."""
    inputs = load_inputs(paths)
    base = out.parent
    datasets = inputs.datasets(list(DATASETS))
    in_domain = params.prepare.train_datasets
    primary, exploratory = _tests(params, inputs, datasets)
    quality = "\n\n".join(
        f"**{name}** (%, 95% Wilson interval):\n\n" + score_table(inputs, metric, datasets, in_domain)
        for name, metric in (("ACC", "acc"), ("EM", "em"))
    )
    headline = (
        headline_section(inputs, datasets, primary, CASE_METHOD)
        + "\n\n" + _figure(paths, ACCURACY_COST, "accuracy against cost per method", base)
        + "\n\n" + _figure(paths, ACCURACY_OVERALL, "overall ACC per method", base)
    )
    sections = [
        ("Change against the base", change),
        (f"Does {CASE_METHOD} beat its baselines here, and why", headline),
        ("Answer quality", quality),
        ("Paired comparisons (same questions)", _paired(primary, exploratory)),
        ("Side experiments", experiments_section(paths.root, base)),
        ("Evaluation questions and the corpus", evidence_section(params, paths.questions, datasets)),
        ("Cost", cost_table(inputs)),
        ("Wall time per stage", timing_table(inputs.timings) or "_No stage recorded its time (`reports/timings/`)._"),
        ("The prober's gate and the skills", _gate_and_skills(inputs)),
        ("Evidence each round found", evidence_gain_table(inputs)),
        ("The loop's own gain and the final answer", loop_section(inputs.traces)),
        ("Prober calibration (dev)", (probe_table(inputs.probe) or "_`reports/probe_detail.json` is missing._")
         + "\n\n" + _figure(paths, "probe_reliability.png", "prober reliability on dev (train_probe)", base)
         + f"\n\nThe same prober on {CASE_METHOD}'s evaluation answers: the share right per score bin (95% Wilson "
         "interval, answers per bin below) and each decision point's dev-chosen cut (an answer is accepted iff its "
         "score is above the cut):\n\n" + _figure(paths, RELIABILITY, "prober reliability on the evaluation", base)
         + "\n\n### Learning curve\n\n" + (learning_curve_table(inputs.probe) or "_No learning curve in `reports/probe_detail.json`._")
         + "\n\n" + _figure(paths, "probe_learning_curve.png", "prober learning curve", base)),
        ("Failure space (paper §4.3, Fig. 2)", _failure_space(inputs, paths, base)),
        ("Case studies (paper Table 2 style)", _cases(inputs, params.report.cases)),
        ("Data quality gates", _data_quality(inputs, paths, base)),
        ("What each metric reads", METRICS_READ),
        ("Provenance", provenance_section(inputs, paths.root)),
    ]
    if not change_first:
        sections = [*sections[1:], sections[0]]
    body = "\n\n".join(f"## {title}\n\n{text}" for title, text in sections)
    return f"{_header(inputs, datasets)}\n\n{body}\n"
