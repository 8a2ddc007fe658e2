"""Reuse of deterministic LM results: methods that start alike share their generations.

Greedy decoding makes a generation a function of what determines it (`GenerateCall.key`: the
prompt, token budget, stops and cached prefix). Several methods start the same way
(no_retrieval's answer is the before-retrieval answer of probing_rag, skill_rag, entropy_rag and
Adaptive-RAG's strategy A; single_step's is their after-evidence answer and IRCoT's first step), so `ReusingLM` answers a
repeated generation from its memory, or from `seeds`: the generations the no_retrieval and
single_step evaluate stages stored (skillrag.eval.generations), read-only.

A stored generation serves a call when only what is *captured* differs, as long as it captured
at least the call's layers: the call gets it with the hidden states of its own layers only (none
when it asked for none), exactly what computing it would have returned. A call with
`attention=True` carries an attention summary that a generation made without it cannot supply,
and a call without it must get none, so attention calls are served only by generations made
with attention, and the others only by generations made without it: a served result is always
bit for bit the one the call would have computed.

Costs as incurred: every generation it computes carries the seconds it took
(`Generation.compute_s`; computed in one call with others, each row its equal share of the call's
time), and keeps them when reused; a choice (`Choice.compute_s`) likewise, so a trace is charged a reused result's original compute time
(skillrag.methods.base.Meter) and each method's latency is what it would cost alone. Calls are
counted above it (`MeteredLM`): a reused generation is charged its calls and tokens too.

Memory is bounded: at most `capacity` results, least recently used dropped first (a result holds
its pooled hidden states, a few hundred kB for a large model). Reused results are shared objects:
callers must not modify them. Not thread-safe: one thread calls it (the batching scheduler, or
the question-at-a-time runner).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from skillrag.lm.base import LM, Choice, Generation
from skillrag.lm.calls import (
    ChooseCall,
    GenerateCall,
    GenerateRequest,
    RequestLM,
    ScoreCall,
    choices_of,
    generations_of,
    scores_of,
)


@dataclass(frozen=True)
class ReuseStats:
    """Generations that could be answered from memory (`lookups`) and those that were (`hits`)."""

    lookups: int = 0
    hits: int = 0

    def __add__(self, other: ReuseStats) -> ReuseStats:
        return ReuseStats(self.lookups + other.lookups, self.hits + other.hits)

    def __sub__(self, other: ReuseStats) -> ReuseStats:
        return ReuseStats(self.lookups - other.lookups, self.hits - other.hits)

    def as_dict(self) -> dict[str, Any]:
        rate = self.hits / self.lookups if self.lookups else 0.0
        return {"lookups": self.lookups, "hits": self.hits, "hit_rate": rate}


def tensor_fields(generation: Generation) -> list[str]:
    """The fields of `generation` holding hidden states (nested dicts with tensors at the leaves,
    keyed by layer id last): `hidden`, and any other pooling of the same layers."""
    def holds(value: Any) -> bool:
        return isinstance(value, torch.Tensor) or (
            isinstance(value, Mapping) and any(holds(v) for v in value.values())
        )

    return [f.name for f in fields(generation) if holds(getattr(generation, f.name))]


def _only(tree: Any, layers: frozenset[int]) -> Any:
    """`tree` with only the entries of `layers` at its layer level (the level keyed by int)."""
    if isinstance(tree, Mapping):
        return {k: _only(v, layers) for k, v in tree.items() if not isinstance(k, int) or k in layers}
    return tree


@dataclass(frozen=True)
class Made:
    """A computed generation: the key of what determined it, the layers its hidden states cover,
    and whether it was made with attention."""

    key: str
    generation: Generation
    layers: frozenset[int]
    attention: bool

    def serves(self, call: GenerateCall) -> bool:
        return call.attention == self.attention and set(call.capture or ()) <= self.layers

    def served(self, call: GenerateCall) -> Generation:
        """The generation as `call` would have computed it: its own layers' hidden states only."""
        asked = frozenset(call.capture or ())
        if asked == self.layers:
            return self.generation
        narrowed = {
            name: _only(getattr(self.generation, name), asked) if asked else None
            for name in tensor_fields(self.generation)
        }
        return replace(self.generation, **narrowed)


class ReusingLM(RequestLM):
    """The LM, answering a generation from memory or `seeds` when one that serves the call was
    made before (see the module docstring). `capture`: layers every computed generation captures
    in addition to the call's (the stored stages capture the layers any later method may ask
    for); `record`: keep every computed generation in `made`, for storing."""

    def __init__(
        self,
        lm: LM,
        capacity: int,
        seeds: Mapping[str, Made] | None = None,
        capture: Sequence[int] = (),
        record: bool = False,
    ) -> None:
        if capacity < 0:
            raise ValueError(f"reuse capacity must be >= 0, got {capacity}")
        self.inner, self.capacity, self.seeds = lm, capacity, dict(seeds or {})
        self.capture, self.record = tuple(capture), record
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size
        self._memory: OrderedDict[str, Made] = OrderedDict()
        self.made: list[Made] = []
        self.stats = ReuseStats()

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        """Each prompt from memory or the seeds when a generation there serves the call; the
        others in one call (a prompt repeated within the call is computed once)."""
        [generations] = self.serve_generate_calls([(call, prompts)])
        return generations

    def serve_generate_calls(self, requests: Sequence[GenerateRequest]) -> list[list[Generation]]:
        """`serve_generate` for requests of one `GenerateCall.batch_group`: what memory and the
        seeds do not serve is computed in one call to the inner LM."""
        keys = [[call.key(prompt) for prompt in prompts] for call, prompts in requests]
        found: dict[str, Generation | None] = {}
        missing: list[tuple[GenerateCall, dict[str, str]]] = []  # per call, key -> prompt to compute
        for (call, prompts), asked in zip(requests, keys, strict=True):
            todo = {}
            for key, prompt in zip(asked, prompts, strict=True):
                if key not in found:
                    found[key] = self._recall(key, call)
                    if found[key] is None:
                        todo[key] = prompt
            if todo:
                missing.append((call, todo))
        computed = sum(len(todo) for _, todo in missing)
        if missing:
            wide = [replace(call, capture=self._captured(call)) for call, _ in missing]
            started = time.perf_counter()
            to_compute = [(w, list(todo.values())) for w, (_, todo) in zip(wide, missing, strict=True)]
            made_by_call = generations_of(self.inner, to_compute)
            share = (time.perf_counter() - started) / computed
            for w, (call, todo), generations in zip(wide, missing, made_by_call, strict=True):
                for key, generation in zip(todo, generations, strict=True):
                    generation.compute_s = share
                    made = Made(key, generation, frozenset(w.capture or ()), call.attention)
                    self._remember(made)
                    found[key] = made.served(call)
        lookups = sum(len(asked) for asked in keys)
        self.stats += ReuseStats(lookups, lookups - computed)
        return [[found[key] for key in asked] for asked in keys]

    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        return scores_of(self.inner, calls)

    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        """Passed through (a result depends on its caller's `pick`), each choice charged its equal
        share of the call's time."""
        started = time.perf_counter()
        choices = choices_of(self.inner, calls)
        share = (time.perf_counter() - started) / max(len(calls), 1)
        return [replace(choice, compute_s=share) for choice in choices]

    def _captured(self, call: GenerateCall) -> tuple[int, ...] | None:
        """The layers a computed generation captures: the call's and `capture`."""
        return tuple(sorted({*(call.capture or ()), *self.capture})) or None

    def _recall(self, key: str, call: GenerateCall) -> Generation | None:
        made = self._memory.get(key)
        if made is not None and made.serves(call):
            self._memory.move_to_end(key)
            return made.served(call)
        made = self.seeds.get(key)
        return made.served(call) if made is not None and made.serves(call) else None

    def _remember(self, made: Made) -> None:
        if self.record:
            self.made.append(made)
        if self.capacity == 0:
            return
        self._memory[made.key] = made
        self._memory.move_to_end(made.key)
        while len(self._memory) > self.capacity:
            self._memory.popitem(last=False)
