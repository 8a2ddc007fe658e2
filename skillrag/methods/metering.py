"""Call metering: costs are counted by wrapping the LM and the retriever, so every call (answer,
skill, router) is counted where it happens and no method can forget one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from skillrag.lm.base import LM, Choice, Generation
from skillrag.lm.calls import ChooseCall, GenerateCall, RequestLM, ScoreCall, choices_of, scores_of
from skillrag.methods.trace import Cost
from skillrag.retrieval.base import Hit, Retriever


class Meter:
    """Costs accumulated since the last `take`.

    Latency is charged as incurred: an LM call's results that carry the compute seconds they took
    when made (`Generation.compute_s`, `Choice.compute_s`, recorded by
    skillrag.methods.reuse.ReusingLM: a reused result its original's, a row of a batched call its
    equal share of the call) are charged those seconds instead of the time the caller waited for
    them, so a trace's latency is what its method would cost alone. Results without the record (a
    loglikelihood, an LM not wrapped by ReusingLM) are charged the wait."""

    def __init__(self) -> None:
        self.pending = Cost()

    def charge(self, made_s: Sequence[float | None], waited_s: float) -> None:
        """Charge `made_s` (each result's compute seconds) instead of `waited_s` when all are known."""
        if made_s and None not in made_s:
            self.pending.latency_s += sum(made_s) - waited_s

    def take(self, latency_s: float) -> Cost:
        """The pending costs, their latency `latency_s` of wall time plus what was charged
        instead of waits; the meter starts again from zero."""
        taken, self.pending = replace(self.pending, latency_s=self.pending.latency_s + latency_s), Cost()
        return taken


class MeteredLM(RequestLM):
    """The LM, counting calls and tokens on a Meter; a call counts even when it raises."""

    def __init__(self, lm: LM, meter: Meter) -> None:
        self.inner, self.meter = lm, meter
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        self.meter.pending.llm_calls += 1
        started = time.perf_counter()
        out = call.run(self.inner, prompts)
        self.meter.charge([g.compute_s for g in out], time.perf_counter() - started)
        self.meter.pending.tokens_in += sum(g.prompt_tokens for g in out)
        self.meter.pending.tokens_out += sum(g.new_tokens for g in out)
        return out

    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        self.meter.pending.llm_calls += len(calls)
        return scores_of(self.inner, calls)

    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        """One call per choice however many options it scores: its prompt is run once."""
        self.meter.pending.llm_calls += len(calls)
        started = time.perf_counter()
        choices = choices_of(self.inner, calls)
        self.meter.charge([c.compute_s for c in choices], time.perf_counter() - started)
        self.meter.pending.tokens_in += sum(c.prompt_tokens for c in choices)
        self.meter.pending.tokens_out += sum(c.generation.new_tokens for c in choices if c.generation)
        return choices


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
