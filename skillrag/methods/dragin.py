"""DRAGIN (Su et al. 2024; reference: the oneal2000/DRAGIN repository): retrieval triggered by a
token's real-time information need (RIND), with the query formed from the model's attention (QFS).

Each step continues the CoT prompt (with the latest passages, if any) and the text kept so far,
asking the LM for its attention summary (skillrag.lm.base.Attention). A generated token's RIND is
its entropy x the largest attention any later generated token gives it x whether it belongs to a
real word (not a stop word; the reference uses a part-of-speech filter). At the first token whose
RIND exceeds `methods.dragin.threshold` (auto: tuned on dev, skillrag.methods.thresholds) the
output is cut before that token, and the query is formed by QFS: the `methods.dragin.query_words`
real words of the question and the kept text that the last position attends to most, read from
one more call on the closed-book prompt + kept text (the reference also runs the model again on
question + text for this), in text order. The top-k passages replace the previous ones, and the
first sentence generated over them from the cut is kept unchecked (the reference's
`get_top_sentence`); then the RIND loop goes on. With no token above the threshold (or after
`methods.dragin.max_retrievals` retrievals) the continuation is kept whole and the CoT ends.

Rounds: one per retrieval (stage "dragin": its query, passages, the CoT so far), then "answer".
"""

from __future__ import annotations

from skillrag.data.schema import Passage
from skillrag.lm.base import Attention, Generation
from skillrag.methods.base import Components, Meter, Method, Session, cot_attempt
from skillrag.methods.thresholds import resolve_threshold
from skillrag.methods.tokens import real_tokens, real_words, starts, token_sentences
from skillrag.prompts.cot import STOP, cot_prompt

THRESHOLD = "methods.dragin.threshold"


def rind(generation: Generation) -> list[float]:
    """Each generated token's RIND: entropy x max attention received from later tokens x real word."""
    if generation.attention is None:
        raise RuntimeError("DRAGIN needs the LM's attention summary (generate(..., attention=True))")
    real = real_tokens(generation.pieces)
    return [h * a * r for h, a, r in zip(generation.entropies, generation.attention.received, real, strict=True)]


def highest_rind(generation: Generation) -> float:
    """The largest RIND of a generation (0 when empty): DRAGIN retrieves when it exceeds the threshold."""
    return max(rind(generation), default=0.0)


def qfs_query(attention: Attention, spans: list[tuple[int, int]], n: int) -> str:
    """The `n` distinct real words inside `spans` (character ranges of the prompt) that the
    prompt's last position attends to most (a word's weight: its best occurrence), in the order
    they first occur."""
    text = "".join(attention.prompt_pieces)
    best: dict[str, tuple[float, int, str]] = {}  # lower-cased word -> (weight, first position, word)
    for position, (word, weight) in enumerate(real_words(text, attention.prompt, starts(attention.prompt_pieces), spans)):
        seen = best.get(word.lower())
        best[word.lower()] = (max(weight, seen[0]), seen[1], seen[2]) if seen else (weight, position, word)
    top = sorted(best.values(), key=lambda item: -item[0])[:n]
    return " ".join(word for _, _, word in sorted(top, key=lambda item: item[1]))


class Dragin(Method):
    name = "dragin"

    def __init__(self, components: Components, meter: Meter | None = None) -> None:
        super().__init__(components, meter)
        self.threshold = resolve_threshold(components.params.dragin.threshold, THRESHOLD, components.thresholds)

    def run(self, session: Session) -> None:
        question, dragin, budget = session.question.question, self.components.params.dragin, self.components.max_new_tokens
        cot, passages, used, retrievals = "", (), 0, 0
        while True:
            prompt = cot_prompt(question, passages, self.components.passage_words)
            generation = self.lm.generate(
                [prompt.text + cot], budget - used, stop=STOP, prefix=prompt.prefix, attention=True
            )[0]
            cut = next((i for i, score in enumerate(rind(generation)) if score > self.threshold), None)
            if cut is None or retrievals == dragin.max_retrievals:
                cot += generation.text
                self._finish(session, question, passages, cot, generation.stopped_by == "length", cut is None)
                return
            cot, used, retrievals = cot + "".join(generation.pieces[:cut]), used + cut, retrievals + 1
            query = self._qfs(question, cot, dragin.query_words) or question
            passages = tuple(found.passage for found in self.retriever.search(query, self.components.k))
            # As the reference does, the sentence written over the new passages is kept unchecked
            # (checked, its first token could fire again at once and retrieve the same forever).
            prompt = cot_prompt(question, passages, self.components.passage_words)
            after = self.lm.generate([prompt.text + cot], budget - used, stop=STOP, prefix=prompt.prefix)[0]
            sentence = token_sentences(after)[0]
            cot, used = cot + sentence.text, used + len(sentence.pieces)
            session.record_attempt("dragin", [query], cot_attempt(question, self.components.passage_words, passages, cot))
            if sentence.last or used >= budget:
                self._finish(session, question, passages, cot, not sentence.last, sentence.last)
                return

    def _finish(
        self, session: Session, question: str, passages: tuple[Passage, ...], cot: str, budget_hit: bool, ended: bool
    ) -> None:
        """The closing round: the whole CoT's answer; "done" when the CoT ended on its own."""
        session.record_attempt("answer", [], cot_attempt(question, self.components.passage_words, passages, cot, budget_hit))
        session.stop("done" if ended else "max_rounds")

    def _qfs(self, question: str, cot: str, n: int) -> str:
        """QFS over the question and the kept CoT, read from the closed-book prompt + kept CoT."""
        prompt = cot_prompt(question)
        [read] = self.lm.generate([prompt.text + cot], 1, stop=STOP, prefix=prompt.prefix, attention=True)
        if read.attention is None:
            raise RuntimeError("DRAGIN needs the LM's attention summary (generate(..., attention=True))")
        # Offsets from the end: the tokens' texts may start with a special token (gemma's <bos>).
        shift = len("".join(read.attention.prompt_pieces)) - len(prompt.text + cot)
        asked = prompt.text.rindex(question) + shift
        end = len(prompt.text) + shift
        spans = [(asked, asked + len(question)), (end, end + len(cot))]
        return qfs_query(read.attention, spans, n)
