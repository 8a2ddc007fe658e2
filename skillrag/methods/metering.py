"""Call metering: costs are counted by wrapping the LM and the retriever, so every call (answer,
skill, router) is counted where it happens and no method can forget one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from skillrag.lm.base import LM, Choice, Generation, Option, Pick
from skillrag.methods.trace import Cost
from skillrag.retrieval.base import Hit, Retriever


class Meter:
    """Costs accumulated since the last `take`."""

    def __init__(self) -> None:
        self.pending = Cost()

    def take(self, latency_s: float) -> Cost:
        taken, self.pending = replace(self.pending, latency_s=latency_s), Cost()
        return taken


class MeteredLM:
    """The LM, counting calls and tokens on a Meter; a call counts even when it raises."""

    def __init__(self, lm: LM, meter: Meter) -> None:
        self.inner, self.meter = lm, meter
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> list[Generation]:
        self.meter.pending.llm_calls += 1
        asked = {"attention": True} if attention else {}  # LMs without the option serve everyone else
        out = self.inner.generate(prompts, max_new_tokens, stop=stop, capture=capture, prefix=prefix, **asked)
        self.meter.pending.tokens_in += sum(g.prompt_tokens for g in out)
        self.meter.pending.tokens_out += sum(g.new_tokens for g in out)
        return out

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        self.meter.pending.llm_calls += 1
        return self.inner.loglikelihood(prompt, continuations)

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        """One call however many options are scored: the prompt is run once."""
        self.meter.pending.llm_calls += 1
        choice = self.inner.choose_and_generate(prompt, options, prefix=prefix, pick=pick)
        self.meter.pending.tokens_in += choice.prompt_tokens
        self.meter.pending.tokens_out += choice.generation.new_tokens if choice.generation else 0
        return choice


class MeteredRetriever:
    """The retriever, counting one retrieval per query."""

    def __init__(self, retriever: Retriever, meter: Meter) -> None:
        self.inner, self.meter = retriever, meter

    def search(self, query: str, k: int) -> list[Hit]:
        self.meter.pending.retrievals += 1
        return self.inner.search(query, k)

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.meter.pending.retrievals += len(queries)
        return self.inner.batch_search(queries, k)
