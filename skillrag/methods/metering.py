"""Call metering: costs are counted by wrapping the LM and the retriever, so every call (answer,
skill, router) is counted where it happens and no method can forget one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from skillrag.lm.base import LM, Choice, Generation, Option, Pick
from skillrag.lm.calls import COMPUTE_S, GenerateCall
from skillrag.methods.trace import Cost
from skillrag.retrieval.base import Hit, Retriever


class Meter:
    """Costs accumulated since the last `take`.

    Latency is charged as incurred: an LM call's results that carry the compute seconds they took
    when made (`COMPUTE_S`, recorded by skillrag.methods.reuse.ReusingLM: a reused result its
    original's, a row of a batched call its equal share of the call) are charged those seconds
    instead of the time the caller waited for them, so a trace's latency is what its method would
    cost alone. Results without the record (a choice that generates nothing, a loglikelihood, an
    LM not wrapped by ReusingLM) are charged the wait."""

    def __init__(self) -> None:
        self.pending = Cost()

    def charge(self, results: Sequence[Generation], waited_s: float) -> None:
        made = [g.extra.get(COMPUTE_S) for g in results]
        if made and None not in made:
            self.pending.latency_s += sum(made) - waited_s

    def take(self, latency_s: float) -> Cost:
        """The pending costs, their latency `latency_s` of wall time plus what was charged
        instead of waits; the meter starts again from zero."""
        taken, self.pending = replace(self.pending, latency_s=self.pending.latency_s + latency_s), Cost()
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
        started = time.perf_counter()
        out = GenerateCall.of(max_new_tokens, stop, capture, prefix, attention).run(self.inner, prompts)
        self.meter.charge(out, time.perf_counter() - started)
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
        started = time.perf_counter()
        choice = self.inner.choose_and_generate(prompt, options, prefix=prefix, pick=pick)
        self.meter.charge([choice.generation] if choice.generation else [], time.perf_counter() - started)
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
