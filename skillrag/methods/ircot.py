"""IRCoT (Trivedi et al. 2023): retrieval interleaved with chain-of-thought reasoning.

Retrieve with the question; then, step by step, continue the CoT over the passages collected so
far and keep only the first new sentence (the paper's reason step: "we only take the first
generated sentence and discard the rest"), and retrieve with the CoT's last sentence, the new
one (the retrieve step; when the model wrote an unfinished fragment, the sentence it completes),
adding the new passages to the collected ones. The reasoning ends when the sentence is followed
by the `Answer:` line or says "the answer is" (the paper's end: "answer is" in the sentence), when
nothing more is generated, or at `methods.ircot.max_steps`, whose step keeps its whole
continuation (the answer line included).

A step whose sentence says "the answer is" keeps its continuation through the `Answer:` line
that the same generation goes on to write, if it writes one: the answer is read from the whole
CoT by the strict parser every method uses (the `Answer:` line; none scores wrong). Keeping only
the sentence would drop that line and score an answer the model gave as none; reading "the answer
is X" itself as the answer would give IRCoT a looser parser than the methods it is compared
with. The paper's CoT reader, too, reads the answer at the end of a CoT written through (its
"answer is:" sentence; this project's exemplars end with the `Answer:` line instead).
A repeated sentence is retrieved with again, as in the paper: on the real 135M model stopping
there instead lost answers the next step would have written.

Each step continues the same CoT prompt as the other methods (skillrag.prompts.cot), its
passages block the collected passages, at most `methods.ircot.max_passages` (the paper keeps
15), the newest interleaved first (`interleave`), each cut to `retrieval.passage_words` words as
in every answer prompt. The first step is single_step's generation call (same prompt, budget,
stop strings and cached prefix, when `max_passages` >= `retrieval.k`), capturing nothing: the
reuse cache serves it single_step's result, which differs only in what was captured. Each step is one round: its query,
the passages it read, the CoT so far. The continuation assumes the plain prompt format
(`lm.prompt_format`): a chat template would close the user turn before the partial rationale.
"""

from __future__ import annotations

import re

from skillrag.data.schema import Passage
from skillrag.methods.base import Attempt, Method, Session, interleave
from skillrag.prompts.cot import STOP, cot_prompt, parse_answer
from skillrag.text import split_sentences

_SAYS_ANSWER = re.compile(r"\bthe answer is\b", re.IGNORECASE)


def next_thought(continuation: str) -> tuple[str, bool]:
    """The text a step keeps of a CoT continuation, and whether the reasoning ends with it.
    Kept: the first sentence (as generated, with its leading space); the whole continuation
    when the answer line follows that sentence directly, or when the sentence says "the answer
    is" and the continuation goes on to an answer line (see the module docstring). It ends the
    reasoning when it reaches the answer line, says "the answer is", or nothing was generated."""
    parsed = parse_answer(continuation)
    found = split_sentences(parsed.reasoning)
    if len(found) < 2:  # at most one sentence before the answer line (or no answer line)
        return continuation, bool(parsed.answer) or not continuation.strip()
    start = len(continuation) - len(continuation.lstrip())
    sentence = continuation[: start + len(found[0])]
    if not _SAYS_ANSWER.search(sentence):
        return sentence, False
    return (continuation if parsed.answer else sentence), True


def last_sentence(text: str) -> str:
    """The last sentence of `text` (all of it when no sentence ends before its end)."""
    return (split_sentences(text.rstrip()) or [""])[-1].strip()


class IRCoT(Method):
    """Rounds: "retrieval" (the question's passages, the first sentence), then one "ircot" round
    per further step (the CoT's last sentence as the query); ends "done" when the reasoning ended
    on its own, "max_rounds" when the step limit ended it."""

    name = "ircot"

    def run(self, session: Session) -> None:
        steps = self.components.params.ircot
        question = session.question.question
        query, stage, cot = question, "retrieval", ""
        collected: list[Passage] = []
        for step in range(1, steps.max_steps + 1):
            found = [hit.passage for hit in self.retriever.search(query, self.components.k)]
            collected = interleave([found, collected], steps.max_passages)
            prompt = cot_prompt(question, collected, self.components.passage_words)
            generation = self.lm.generate(
                [prompt.text + cot], self.components.max_new_tokens, stop=STOP, prefix=prompt.prefix
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
