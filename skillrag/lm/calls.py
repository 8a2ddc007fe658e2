"""The LM's calls as request objects, and the one place their keyword signatures are mapped onto
them: a request passes whole through every wrapper of an LM (metering, reuse, the batching
front) down to the model, which serves a list of them in one batch.

`GenerateCall` is one `LM.generate` call's arguments apart from its prompts: what determines each
prompt's generation, what the call captures beside it. Greedy decoding makes a generation a
function of its prompt, `max_new_tokens`, `stop` and `prefix` (`GenerateCall.key`): the reuse
cache (skillrag.methods.reuse) and the stored generations of the evaluate stages are keyed by it.
`capture` and `attention` only add readings of the same pass, so calls that differ in them still
make the same text; calls equal in everything but their token budget (`GenerateCall.batch_group`)
can share one batched model call, each row decoding to its own budget (skillrag.eval.batching),
so a method whose budget left shrinks as it goes (DRAGIN) is batched across questions too.
`ChooseCall` is one `choose_and_generate` call, `ScoreCall` one `loglikelihood` call; lists of
them are served in one batch (skillrag.lm.hf).

`RequestLM` is the base of every LM here: it writes the `LM` protocol's signatures once, in terms
of `serve_generate`, `serve_choices` and `serve_scores`. An LM written against the plain protocol
(a test's scripted LM) is served too: `GenerateCall.run` hands a request to any LM's `generate`
(already batched over its prompts), `choices_of` and `scores_of` a list of them whole to a
RequestLM, else one call at a time through its plain methods.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillrag.lm.base import LM, Choice, Generation, Option, Pick, Stop
from skillrag.provenance import text_digest


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
        """This call on `prompts` by `lm`, through its `generate` (a RequestLM makes this request
        of it again, so an LM that refines `generate`, such as a test's scripted one, is served as
        it says). `attention` is passed only when asked for, so LMs without the option serve
        every other call."""
        asked = {"attention": True} if self.attention else {}
        return lm.generate(
            list(prompts), self.max_new_tokens, stop=self.stop, capture=self.capture, prefix=self.prefix, **asked
        )

    def batch_group(self) -> tuple:
        """What calls must share to be served in one batch: everything but the token budget (a row
        ends at its own call's budget, and a row's tokens do not depend on its neighbours')."""
        return (self.stop, self.capture, self.prefix, self.attention)

    def key(self, prompt: str) -> str:
        """What determines `prompt`'s generation under this call, as a digest that can be stored:
        the prompt, the token budget, the stops (a pattern by its source and flags) and the prefix."""
        stops = [[s.pattern, s.flags] if isinstance(s, re.Pattern) else s for s in self.stop]
        text = json.dumps([prompt, self.max_new_tokens, stops, self.prefix], ensure_ascii=False)
        return text_digest(text)


GenerateRequest = tuple[GenerateCall, list[str]]
"""One `generate` call: its arguments, and its prompts."""


@dataclass(frozen=True)
class ChooseCall:
    """One `choose_and_generate(prompt, options, prefix, pick)` call."""

    prompt: str
    options: tuple[Option, ...]
    prefix: str | None = None
    pick: Pick | None = None


@dataclass(frozen=True)
class ScoreCall:
    """One `loglikelihood(prompt, continuations)` call."""

    prompt: str
    continuations: tuple[str, ...]


class RequestLM(LM, ABC):
    """An LM that serves requests: the `LM` protocol (declared in skillrag.lm.base, its attributes
    and calls) implemented once here, each call made one request and served (see the module
    docstring)."""

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[Stop] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> list[Generation]:
        """See `skillrag.lm.base.LM.generate`."""
        return self.serve_generate(GenerateCall.of(max_new_tokens, stop, capture, prefix, attention), list(prompts))

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """See `skillrag.lm.base.LM.loglikelihood`."""
        [scores] = self.serve_scores([ScoreCall(prompt, tuple(continuations))])
        return scores

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        """See `skillrag.lm.base.LM.choose_and_generate`."""
        [choice] = self.serve_choices([ChooseCall(prompt, tuple(options), prefix, pick)])
        return choice

    @abstractmethod
    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        """One generation per prompt under `call`."""

    def serve_generate_calls(self, requests: Sequence[GenerateRequest]) -> list[list[Generation]]:
        """Each request's generations, as `serve_generate` makes them, for requests in one
        `GenerateCall.batch_group`: a model decodes them in one batch, each row to its own call's
        budget. Here, the requests with equal calls in one `generate` each (through the public
        method, so a subclass that wraps `generate` sees every call)."""
        return _by_call(requests, lambda call, prompts: call.run(self, prompts))

    @abstractmethod
    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        """One choice per call, each as its call alone would make it."""

    @abstractmethod
    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        """The continuations' log-likelihoods per call, each as its call alone would score them."""


def generations_of(lm: LM, requests: Sequence[GenerateRequest]) -> list[list[Generation]]:
    """`requests` (of one `GenerateCall.batch_group`) served by `lm`: in one batch by a
    RequestLM, else one call at a time."""
    if isinstance(lm, RequestLM):
        return lm.serve_generate_calls(requests)
    return _by_call(requests, lambda call, prompts: call.run(lm, prompts))


def _by_call(
    requests: Sequence[GenerateRequest], serve: Callable[[GenerateCall, list[str]], list[Generation]]
) -> list[list[Generation]]:
    """Each request's generations, the prompts of the requests with equal calls in one `serve`."""
    by_call: dict[GenerateCall, list[int]] = {}
    for i, (call, _) in enumerate(requests):
        by_call.setdefault(call, []).append(i)
    served: list[list[Generation]] = [[] for _ in requests]
    for call, group in by_call.items():
        made = iter(serve(call, [prompt for i in group for prompt in requests[i][1]]))
        for i in group:
            served[i] = [next(made) for _ in requests[i][1]]
    return served


def choices_of(lm: LM, calls: Sequence[ChooseCall]) -> list[Choice]:
    """`calls` served by `lm`: in one batch by a RequestLM, else one call at a time."""
    if isinstance(lm, RequestLM):
        return lm.serve_choices(calls)
    return [lm.choose_and_generate(c.prompt, c.options, prefix=c.prefix, pick=c.pick) for c in calls]


def scores_of(lm: LM, calls: Sequence[ScoreCall]) -> list[list[float]]:
    """`calls` served by `lm`: in one batch by a RequestLM, else one call at a time."""
    if isinstance(lm, RequestLM):
        return lm.serve_scores(calls)
    return [lm.loglikelihood(c.prompt, c.continuations) for c in calls]
