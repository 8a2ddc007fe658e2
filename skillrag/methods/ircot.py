"""IRCoT (Trivedi et al. 2023): retrieval interleaved with chain-of-thought reasoning.

Retrieve with the question; then, step by step, continue the CoT over the passages collected so
far and keep only the first new sentence (the paper's reason step: "we only take the first
generated sentence and discard the rest"), and retrieve with the CoT's last sentence, the new
one (the retrieve step; when the model wrote an unfinished fragment, the sentence it completes),
adding the new passages to the collected ones. The reasoning ends when the sentence is followed
by the `Answer:` line or says "the answer is", when nothing more is generated, or at
`methods.ircot.max_steps`, whose step keeps its whole continuation (the answer line included).
A repeated sentence is retrieved with again, as in the paper: on the real 135M model stopping
there instead lost answers the next step would have written.

Each step continues the same CoT prompt as the other methods (skillrag.prompts.cot), its
passages block the collected passages, at most `methods.ircot.max_passages` (the paper keeps
15), the newest interleaved first (`interleave`), each cut to `retrieval.passage_words` words as
in every answer prompt; the answer is read from the whole CoT by the same strict parser. The
first step's generation is single_step's, so evaluation reuses it. Each step is one round: its
query, the passages it read, the CoT so far. The continuation assumes the plain prompt format
(`lm.prompt_format`): a chat template would close the user turn before the partial rationale.
"""

from __future__ import annotations

import re

from skillrag.data.schema import Passage
from skillrag.methods.base import Attempt, Method, Session, interleave
from skillrag.methods.simple import RETRIEVAL_READS
from skillrag.prompts.cot import STOP, cot_prompt, parse_answer
from skillrag.text import split_sentences

_SAYS_ANSWER = re.compile(r"\bthe answer is\b", re.IGNORECASE)


def next_thought(continuation: str) -> tuple[str, bool]:
    """The first sentence of a CoT continuation (as generated, with its leading space), and
    whether the reasoning ends with it: the answer line follows it directly (then it is kept
    too), the sentence says "the answer is", or nothing was generated."""
    parsed = parse_answer(continuation)
    found = split_sentences(parsed.reasoning)
    if len(found) < 2:  # at most one sentence before the answer line (or no answer line)
        return continuation, bool(parsed.answer) or not continuation.strip()
    start = len(continuation) - len(continuation.lstrip())
    sentence = continuation[: start + len(found[0])]
    return sentence, bool(_SAYS_ANSWER.search(sentence))


def last_sentence(text: str) -> str:
    """The last sentence of `text` (all of it when no sentence ends before its end)."""
    return (split_sentences(text.rstrip()) or [""])[-1].strip()


class IRCoT(Method):
    """Rounds: "retrieval" (the question's passages, the first sentence), then one "ircot" round
    per further step (the CoT's last sentence as the query); ends "done" when the reasoning ended
    on its own, "max_rounds" when the step limit ended it."""

    name = "ircot"
    reads = (*Method.reads, *RETRIEVAL_READS, "methods.ircot")

    def run(self, session: Session) -> None:
        steps = self.parts.params.ircot
        question = session.question.question
        query, stage, cot = question, "retrieval", ""
        collected: list[Passage] = []
        for step in range(1, steps.max_steps + 1):
            found = [hit.passage for hit in self.retriever.search(query, self.parts.k)]
            collected = interleave([found, collected], steps.max_passages)
            prompt = cot_prompt(question, collected, self.parts.passage_words)
            generation = self.lm.generate(
                [prompt.text + cot], self.parts.max_new_tokens, stop=STOP, prefix=prompt.prefix
            )[0]
            thought, ended = next_thought(generation.text)
            last = step == steps.max_steps
            if last and not ended:
                thought = generation.text
            cot += thought
            budget_hit = generation.stopped_by == "length" and thought == generation.text
            parsed = parse_answer(cot, prompt.text, truncated=budget_hit)
            attempt = Attempt(
                parsed.reasoning, parsed.answer, tuple(collected), None, None, None, parsed.flexible, budget_hit
            )
            session.record_attempt(stage, [query], attempt)
            if ended or last:
                session.stop("done" if ended else "max_rounds")
                return
            query, stage = last_sentence(cot), "ircot"
