"""One `LM.generate` call's arguments apart from its prompts, as one value: what determines each
prompt's generation, what the call captures beside it, and the one place the call is made.

Greedy decoding makes a generation a function of its prompt, `max_new_tokens`, `stop` and
`prefix` (`GenerateCall.key`): the reuse cache (skillrag.methods.reuse) and the stored
generations of the evaluate stages are keyed by it. `capture` and `attention` only add readings
of the same pass, so calls that differ in them still make the same text; calls with equal
`GenerateCall`s can share one batched model call (skillrag.eval.batching). Every wrapper of an LM
(metering, reuse, batching) passes a call on with `GenerateCall.run`, so the `attention` option
is handed down in one place.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillrag.lm.base import LM, Generation, Stop


@dataclass(frozen=True)
class GenerateCall:
    max_new_tokens: int
    stop: tuple[Stop, ...] = ()
    capture: tuple[int, ...] | None = None  # None: no hidden states
    prefix: str | None = None
    attention: bool = False

    @classmethod
    def of(
        cls,
        max_new_tokens: int,
        stop: Sequence[Stop] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> GenerateCall:
        """The call `generate(prompts, max_new_tokens, stop, capture, prefix, attention)` makes
        (an empty `capture` captures nothing, as None)."""
        return cls(max_new_tokens, tuple(stop), tuple(capture) if capture else None, prefix, attention)

    def run(self, lm: LM, prompts: Sequence[str]) -> list[Generation]:
        """`lm.generate` with these arguments. `attention` is passed only when asked for, so LMs
        without the option (the scripted fakes) serve every other call."""
        asked = {"attention": True} if self.attention else {}
        return lm.generate(
            list(prompts), self.max_new_tokens, stop=self.stop, capture=self.capture, prefix=self.prefix, **asked
        )

    def key(self, prompt: str) -> str:
        """What determines `prompt`'s generation under this call, as a digest that can be stored:
        the prompt, the token budget, the stops (a pattern by its source and flags) and the prefix."""
        stops = [[s.pattern, s.flags] if isinstance(s, re.Pattern) else s for s in self.stop]
        text = json.dumps([prompt, self.max_new_tokens, stops, self.prefix], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


COMPUTE_S = "compute_s"
"""`Generation.extra` key: the seconds of model compute the generation took when it was made (its
share of a batched call), recorded by skillrag.methods.reuse.ReusingLM and charged to every
trace that uses it (skillrag.methods.base.Meter)."""
