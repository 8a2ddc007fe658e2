"""What every language model in skillrag offers: batched greedy generation with optional
hidden-state capture in the same pass, continuation log-likelihoods, and choosing among
continuations then generating after the chosen one on the same prompt pass (the router)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from skillrag.errors import ConfigError
from skillrag.text import answer_span


@dataclass(frozen=True)
class Attention:
    """What DRAGIN reads from one generation's attention (asked for with `attention=True`), from
    the model's last full-attention layer, averaged over heads (not the full tensors).

    `received[i]`: the largest weight any later kept generated token gives kept token i (0 for
    the last one). `prompt[p]`: the weight the prompt's last position (the one that writes the
    first new token) gives prompt token p; `prompt_pieces[p]` is that token's text.
    """

    received: list[float]
    prompt: list[float]
    prompt_pieces: list[str]


POOLINGS = ("generated_mean", "answer_mean", "answer_last")
"""How a generation's per-token states become one vector per layer: the mean over the kept
generated tokens; the mean over the tokens of the answer text on the `Answer:` line
(skillrag.text.answer_span); the last of those tokens. Without an answer on such a line both
answer poolings take the last kept token's state. Correctness probes read best at the exact
answer tokens (Orgad et al. 2024), so all three are captured in the one generation pass."""


def answer_tokens(text: str, ends: Sequence[int]) -> slice:
    """The kept tokens whose text overlaps the answer on the `Answer:` line of `text`
    (`skillrag.text.answer_span`), given where each token's text ends in it (`ends[j]`); the last
    token when there is no answer there (token 0 when none was kept)."""
    span = answer_span(text)
    if span is not None:
        starts = [0, *ends[:-1]]
        inside = [j for j, (a, b) in enumerate(zip(starts, ends)) if a < span[1] and b > span[0]]
        if inside:
            return slice(inside[0], inside[-1] + 1)
    last = max(len(ends), 1)
    return slice(last - 1, last)


def pool(states: torch.Tensor, span: slice, layers: Sequence[int]) -> dict[str, dict[int, torch.Tensor]]:
    """Per-token states of the kept tokens ([tokens, layers, hidden], at least one token) pooled
    every way (`POOLINGS`), the answer poolings over the tokens in `span` (`answer_tokens`):
    pooling -> layer -> float32 CPU vector."""
    states = states.float()
    answer = states[span]
    pooled = torch.stack([states.mean(dim=0), answer.mean(dim=0), answer[-1]]).cpu()  # in POOLINGS order; one copy
    return {name: {layer: pooled[p, j] for j, layer in enumerate(layers)} for p, name in enumerate(POOLINGS)}


@dataclass
class Generation:
    """One generated continuation.

    `pooled` maps a pooling (`POOLINGS`) to a layer id (1-based: the output of transformer block
    `l`, i.e. HF `hidden_states[l]`) to that layer's residual stream pooled over the generated
    tokens, as a float32 CPU tensor of shape [hidden_size]; None when capture was not asked for.
    `hidden` is `pooled["generated_mean"]` (set from `pooled` when that is given).
    `pieces[i]` is the text of kept token i (token-level readers: FLARE's masking, DRAGIN);
    `attention` the summary asked for with `attention=True`, else None. `compute_s`: the seconds
    of model compute it took when it was made (its share of a batched call), recorded by
    skillrag.methods.reuse.ReusingLM and charged to every trace that uses it
    (skillrag.methods.metering.Meter); None where nothing recorded it.
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    prompt_tokens: int
    hidden: dict[int, torch.Tensor] | None = None
    stopped_by: str = "length"  # "stop" | "eos" | "length"
    extra: dict[str, float] = field(default_factory=dict)
    pieces: list[str] = field(default_factory=list)
    attention: Attention | None = None
    pooled: dict[str, dict[int, torch.Tensor]] | None = None
    compute_s: float | None = None

    def __post_init__(self) -> None:
        if self.pooled is not None:
            self.hidden = self.pooled["generated_mean"]

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class Option:
    """One continuation to choose among: `label` is scored; when it is chosen, `lead` follows it
    unscored and then up to `max_new_tokens` are generated until a `stop` string (0: nothing is
    generated, e.g. a decision to stop)."""

    label: str
    lead: str = ""
    max_new_tokens: int = 0
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Choice:
    """What `choose_and_generate` returns: every option's summed label log-likelihood, the index
    chosen, and the generation after it (None when that option generates nothing).
    `prompt_tokens` counts the tokens read: the prompt's and the chosen label's and lead's;
    `compute_s` the seconds of model compute it took (as `Generation.compute_s`)."""

    scores: list[float]
    index: int
    generation: Generation | None
    prompt_tokens: int
    compute_s: float | None = None


Pick = Callable[[list[float]], int]


def argmax(scores: Sequence[float]) -> int:
    """The first index of the highest score (the default pick)."""
    return max(range(len(scores)), key=scores.__getitem__)


Stop = str | re.Pattern[str]
"""Where a row ends: a string ends it before the string's first occurrence; a pattern after its
first match, which is kept (e.g. a completed `Answer:` line)."""


class LM(Protocol):
    """The calls every model offers. Each call is also a request object (skillrag.lm.calls:
    `GenerateCall`, `ChooseCall`, `ScoreCall`); the model and its wrappers (reuse, metering, the
    batching front) implement `skillrag.lm.calls.RequestLM`, which maps these signatures onto
    requests once, so a request passes through every wrapper whole and batched."""

    name: str
    num_layers: int
    hidden_size: int

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[Stop] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> list[Generation]:
        """Greedy-decode every prompt (batched, left-padded) until EOS, a `stop` (see `Stop`) or
        `max_new_tokens`. `prefix`, when given, is a string
        every prompt starts with; its KV cache is computed once and reused. `attention`: also
        summarise the attention weights (`Generation.attention`; the text is unchanged)."""
        ...

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Sum of token log-probabilities of each continuation after `prompt`."""
        ...

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        """One model call: run `prompt` once (its `prefix` KV from the cache), score every option's
        label as `loglikelihood` does, let `pick(scores)` choose (default: argmax), then
        greedy-generate after prompt + label + lead on the same KV, as `generate` would."""
        ...


def state_vector(hidden: Mapping[int, torch.Tensor], layers: Sequence[int]) -> np.ndarray:
    """An answer's hidden state as one vector (numpy, float32): the mean over `layers` of the
    per-layer pooled states of a Generation."""
    return torch.stack([hidden[layer].float() for layer in layers]).mean(dim=0).numpy()


def default_layers(num_layers: int) -> list[int]:
    """The posterior two-thirds of the layers (paper §3.1): for 30 layers, 11..30."""
    first = num_layers - (2 * num_layers) // 3 + 1
    return list(range(first, num_layers + 1))


def resolve_layers(spec: str | Sequence[int], num_layers: int) -> list[int]:
    """`lm.layers`: `posterior_two_thirds` (paper §3.1), `all`, or explicit 1-based layer ids
    (validated)."""
    if spec == "posterior_two_thirds":
        return default_layers(num_layers)
    if spec == "all":
        return list(range(1, num_layers + 1))
    layers = sorted({int(x) for x in spec})
    bad = [x for x in layers if not 1 <= x <= num_layers]
    if bad:
        raise ConfigError(f"layers {bad} do not exist: the model has layers 1..{num_layers}")
    return layers
