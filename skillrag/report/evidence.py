"""How easy retrieval was made, stated where the numbers are read: the share of evaluation
questions whose gold passages are in the corpus, and how that corpus was built.

`prepare.prefer_evidence_in_corpus` draws evaluation questions with their evidence in the corpus
first, and the shared data bundle's corpus is built largely from the questions' own context
paragraphs, so retrieval is easier than over the whole of Wikipedia. The shares are read from
what `prepare` keeps in each question's `meta` (`gold_context_in_corpus`, `answer_in_corpus`,
recorded by the data bundle against its corpus); a question without the flag counts as not
recorded, never as present.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillrag.config import Params
from skillrag.files import read_jsonl
from skillrag.report.tables import markdown_table

BUNDLE_CORPUS = (
    "The shared data bundle's corpus (`corpus/passages.jsonl`, the default `index.corpus_file`) holds 38,675 "
    "passages, about 85% of them the context paragraphs that came with the datasets' questions (HotpotQA, "
    "MuSiQue and 2WikiMultihopQA contexts, NQ gold passages) and the rest Wikipedia passages (DPR and KILT "
    "samples); see the bundle's README. It is not the whole of Wikipedia: retrieval over it is easier than in "
    "the paper's setting, and the retrieval methods' numbers are higher for it."
)


def evidence_counts(questions_dir: Path, datasets: Sequence[str], limit: int | None) -> dict[str, dict[str, int]]:
    """Per evaluated dataset, over the questions evaluate answers (the first `limit` of
    `<questions_dir>/eval/<dataset>.jsonl`): how many, how many with every gold passage in the
    corpus, with an answer string in it, and with no record of their gold passages."""
    counts = {}
    for dataset in datasets:
        file = questions_dir / "eval" / f"{dataset}.jsonl"
        metas = [row.get("meta", {}) for row in read_jsonl(file)][:limit] if file.is_file() else []
        counts[dataset] = {
            "questions": len(metas),
            "gold_in_corpus": sum(m.get("gold_context_in_corpus") is True for m in metas),
            "answer_in_corpus": sum(m.get("answer_in_corpus") is True for m in metas),
            "gold_not_recorded": sum("gold_context_in_corpus" not in m for m in metas),
        }
    return counts


def evidence_section(params: Params, questions_dir: Path, datasets: Sequence[str]) -> str:
    """The report's statement of how the evaluation questions were drawn and the corpus built,
    with the shares per evaluated dataset."""
    counts = evidence_counts(questions_dir, datasets, params.evaluate.limit)

    def share(part: int, whole: int) -> str:
        return f"{part / whole:.0%} ({part})" if whole else "–"

    rows = [
        [dataset, str(c["questions"]), share(c["gold_in_corpus"], c["questions"]),
         share(c["answer_in_corpus"], c["questions"]), share(c["gold_not_recorded"], c["questions"])]
        for dataset, c in counts.items()
    ]
    total = {key: sum(c[key] for c in counts.values()) for key in ("questions", "gold_in_corpus")}
    drawn = (
        "Evaluation questions were drawn preferring evidence in the corpus (`prepare.prefer_evidence_in_corpus: "
        "true`): first those whose gold passages are all in the corpus, then those whose answer string occurs in "
        "some passage, then the rest."
        if params.prepare.prefer_evidence_in_corpus
        else "Evaluation questions were drawn without regard to the corpus (`prepare.prefer_evidence_in_corpus: false`)."
    )
    table = markdown_table(
        ["dataset", "questions", "gold passages in corpus", "answer string in corpus", "gold passages not recorded"], rows
    )
    return (
        f"{drawn} Over all evaluation sets, {share(total['gold_in_corpus'], total['questions'])} of "
        f"{total['questions']} questions have their gold passages in the corpus. Corpus: "
        f"`{params.index.corpus_file.name}`. {BUNDLE_CORPUS}\n\n{table}"
    )
