"""FLARE-direct (Jiang et al. 2023), after FlashRAG's `FLAREPipeline`: active retrieval sentence by
sentence, triggered by a low-probability token.

The CoT is written one sentence at a time. Each step generates a look-ahead (up to
`methods.flare.look_ahead` tokens) continuing the CoT prompt and the sentences kept so far, and
takes its first sentence. If every token of that sentence has probability at least theta
(`methods.flare.theta`; auto: tuned on dev, skillrag.methods.thresholds), it is kept. Otherwise
the sentence becomes the query with its low-probability tokens masked out (when no word is left:
the question and the sentences kept so far), the top-k passages are retrieved, and the sentence is
regenerated over them; the regenerated one is kept unchecked. The later sentences of a
look-ahead are checked in turn rather than generated again (greedy decoding would write the same
over the same passages and text), so a confident CoT costs one call. Passages stay in the prompt until
the next retrieval replaces them (FLARE; FlashRAG drops them after the sentence). The CoT ends
when the `Answer:` line is written and a new line follows, when the look-ahead ends on its own,
after `methods.flare.max_iterations` sentences, or at the answer budget (`lm.max_new_tokens`
kept tokens). The answer is read from the whole CoT by the strict parser every method uses.

Rounds: one per retrieval (stage "flare": its query, passages, the CoT so far), then "answer"
(the final CoT and answer over the passages in the prompt at the end).
"""

from __future__ import annotations

import re

from skillrag.data.schema import Passage
from skillrag.lm.base import Generation
from skillrag.methods.base import Components, Meter, Method, Session, cot_attempt
from skillrag.methods.thresholds import resolve_threshold
from skillrag.methods.tokens import Sentence, token_sentences
from skillrag.prompts.cot import STOP, cot_prompt, parse_answer
from skillrag.text import ANSWER_LINE

THETA = "methods.flare.theta"
_WORD = re.compile(r"\w")


def lowest_probability(generation: Generation, max_sentences: int) -> float:
    """The smallest token probability in the first `max_sentences` sentences of a CoT (1 when
    there is none): without retrieval FLARE keeps exactly these sentences, so it retrieves on a
    question iff this is below theta (its first decision, what the dev tuning rates)."""
    probs = [p for sentence in token_sentences(generation)[:max_sentences] for p in sentence.probs]
    return min(probs, default=1.0)


def masked_query(pieces: list[str], probs: list[float], theta: float) -> str:
    """The sentence without its tokens of probability below theta and without the prompt's
    `Answer:` label (an answer line whose answer is masked would search for the word "Answer"),
    whitespace folded; "" when no word is left."""
    kept = "".join(piece for piece, p in zip(pieces, probs) if p >= theta)
    kept = ANSWER_LINE.sub(lambda line: " " + line["answer"], kept)
    query = " ".join(kept.split())
    return query if _WORD.search(query) else ""


class Flare(Method):
    name = "flare"

    def __init__(self, components: Components, meter: Meter | None = None) -> None:
        super().__init__(components, meter)
        self.theta = resolve_threshold(components.params.flare.theta, THETA, components.thresholds)

    def run(self, session: Session) -> None:
        question, flare, budget = session.question.question, self.components.params.flare, self.components.max_new_tokens
        cot, passages, used, kept, ended = "", (), 0, 0, False
        # The rest of the latest look-ahead: greedy decoding would write the same again over the
        # same passages and text, so its sentences are checked in turn instead of regenerated.
        pending: list[Sentence] = []
        while not ended and kept < flare.max_iterations and used < budget:
            pending = pending or self._look_ahead(question, passages, cot, min(flare.look_ahead, budget - used))
            sentence = pending.pop(0)
            if any(p < self.theta for p in sentence.probs):
                query = masked_query(sentence.pieces, sentence.probs, self.theta) or " ".join(f"{question} {cot}".split())
                passages = tuple(hit.passage for hit in self.retriever.search(query, self.components.k))
                pending = self._look_ahead(question, passages, cot, min(flare.look_ahead, budget - used))
                sentence = pending.pop(0)  # kept unchecked: it was written over the evidence
                attempt = cot_attempt(question, self.components.passage_words, passages, cot + sentence.text)
                session.record_attempt("flare", [query], attempt)
            cot, used, kept = cot + sentence.text, used + len(sentence.pieces), kept + 1
            ended = sentence.last or (sentence.newline and bool(parse_answer(cot).answer))
        budget_hit = not ended and used >= budget
        session.record_attempt("answer", [], cot_attempt(question, self.components.passage_words, passages, cot, budget_hit))
        session.stop("done" if ended else "max_rounds")

    def _look_ahead(self, question: str, passages: tuple[Passage, ...], cot: str, budget: int) -> list[Sentence]:
        prompt = cot_prompt(question, passages, self.components.passage_words)
        return token_sentences(self.lm.generate([prompt.text + cot], budget, stop=STOP, prefix=prompt.prefix)[0])
