"""Reuse of deterministic LM results within a run: methods that start alike share them.

Greedy decoding makes a generation a function of its call: the same prompt, token budget, stop
strings, captured layers and cached prefix give the same text, tokens and hidden states. Several
methods start the same way (no_retrieval's answer is stage 1 of probing_rag and skill_rag;
single_step's answer is their stage 2), so `ReusingLM` remembers results by everything that
determines them and answers a repeated call from memory. Costs are counted above it
(`skillrag.methods.base.MeteredLM`), so a reused generation is still charged to the trace that
asked for it, as if computed: per-method costs stay comparable.

Memory is bounded: at most `capacity` results, least recently used dropped first (a result
holds its pooled hidden states, a few hundred kB for a large model). Reused results are shared
objects: callers must not modify them. Not thread-safe: one thread calls it (the batching
scheduler, or the question-at-a-time runner).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from skillrag.lm.base import LM, Choice, Generation, Option, Pick


@dataclass(frozen=True)
class ReuseStats:
    """Calls that could be answered from memory (`lookups`) and those that were (`hits`)."""

    lookups: int = 0
    hits: int = 0

    def __sub__(self, other: ReuseStats) -> ReuseStats:
        return ReuseStats(self.lookups - other.lookups, self.hits - other.hits)

    def as_dict(self) -> dict[str, Any]:
        rate = self.hits / self.lookups if self.lookups else 0.0
        return {"lookups": self.lookups, "hits": self.hits, "hit_rate": rate}


class ReusingLM:
    """The LM, answering a repeated `generate` prompt or `loglikelihood` call from memory.
    `choose_and_generate` is passed through: its result depends on the caller's `pick`."""

    def __init__(self, lm: LM, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"reuse capacity must be >= 0, got {capacity}")
        self.inner, self.capacity = lm, capacity
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size
        self._memory: OrderedDict[Hashable, Any] = OrderedDict()
        self.stats = ReuseStats()

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> list[Generation]:
        """Each prompt from memory when the same call was made before; the others in one call
        (a prompt repeated within the call is computed once)."""
        call = (max_new_tokens, tuple(stop), tuple(capture) if capture else None, prefix, attention)
        keys = [("generate", prompt, *call) for prompt in prompts]
        found = {key: self._recall(key) for key in dict.fromkeys(keys)}
        missing = [key for key, value in found.items() if value is None]
        if missing:
            asked = {"attention": True} if attention else {}  # LMs without the option serve everyone else
            computed = self.inner.generate(
                [key[1] for key in missing], max_new_tokens, stop=stop, capture=capture, prefix=prefix, **asked
            )
            for key, generation in zip(missing, computed, strict=True):
                found[key] = generation
                self._remember(key, generation)
        self._count(len(keys), len(keys) - len(missing))
        return [found[key] for key in keys]

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        key = ("loglikelihood", prompt, tuple(continuations))
        scores = self._recall(key)
        self._count(1, int(scores is not None))
        if scores is None:
            scores = self.inner.loglikelihood(prompt, continuations)
            self._remember(key, scores)
        return list(scores)

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        return self.inner.choose_and_generate(prompt, options, prefix=prefix, pick=pick)

    def _recall(self, key: Hashable) -> Any:
        value = self._memory.get(key)
        if value is not None:
            self._memory.move_to_end(key)
        return value

    def _remember(self, key: Hashable, value: Any) -> None:
        if self.capacity == 0:
            return
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > self.capacity:
            self._memory.popitem(last=False)

    def _count(self, lookups: int, hits: int) -> None:
        self.stats = ReuseStats(self.stats.lookups + lookups, self.stats.hits + hits)
