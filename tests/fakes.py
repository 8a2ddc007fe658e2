"""Scripted fakes that make whole pipelines run on CPU in milliseconds (DSPy-style).

FakeLM replies from a script in call order and fails loudly when the script runs out, so a
test states exactly which calls a pipeline makes. Hidden states are a deterministic function
of the reply text (`fake_pooled`: another one per pooling). FakeProber returns scripted scores; OverlapRetriever ranks a handful of
passages by shared words.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar

import torch

from skillrag.data.schema import Passage
from skillrag.lm.base import POOLINGS, Attention, Choice, Generation, argmax
from skillrag.lm.calls import ChooseCall, GenerateCall, RequestLM, ScoreCall
from skillrag.retrieval.base import Hit


def hidden_state(text: str, layer: int, size: int) -> torch.Tensor:
    """A fixed pseudo-random vector per (text, layer)."""
    seed = zlib.crc32(f"{layer}:{text}".encode())
    return torch.randn(size, generator=torch.Generator().manual_seed(seed))


def fake_pooled(key: str, layers: Sequence[int] | None, size: int) -> dict[str, dict[int, torch.Tensor]] | None:
    """`Generation.pooled` of a fake: `hidden_state(key, ...)` as the generated mean (what
    `Generation.hidden` reads) and other fixed vectors for the answer poolings; None without
    layers (no capture asked for)."""
    if not layers:
        return None
    prefixes = {"generated_mean": ""} | {name: f"{name}:" for name in POOLINGS[1:]}
    return {name: {layer: hidden_state(prefixes[name] + key, layer, size) for layer in layers} for name in POOLINGS}


Reply = str | Generation | Callable[[str], Generation] | Exception


class FakeLM(RequestLM):
    """`replies` answer generate calls (one per prompt), `likelihoods` loglikelihood calls and
    `choices` choose_and_generate calls: (option scores, the text generated after whichever option
    is picked), each script in order; an Exception in any script is raised at that call. A reply
    is a text (one token per word, all confident), a ready Generation (`scripted`: its token
    probabilities, entropies and attention), or a function of the prompt that returns one."""

    name = "fake-lm"
    num_layers = 4
    hidden_size = 8

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        likelihoods: Sequence[Sequence[float] | Exception] = (),
        choices: Sequence[tuple[Sequence[float], str] | Exception] = (),
    ) -> None:
        self.replies = list(replies)
        self.likelihoods = list(likelihoods)
        self.choices = list(choices)
        self.calls: list[tuple[str, str]] = []  # (kind, prompt)

    @staticmethod
    def _next(script: list, kind: str, prompt: str):
        if not script:
            raise AssertionError(f"FakeLM: no scripted {kind} reply left for prompt ending {prompt[-80:]!r}")
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        out = []
        for prompt in prompts:
            assert call.prefix is None or prompt.startswith(call.prefix), "prefix must start the prompt"
            self.calls.append(("generate", prompt))
            reply = self._next(self.replies, "generate", prompt)
            if callable(reply):
                reply = reply(prompt)
            if isinstance(reply, Generation):
                assert call.attention or reply.attention is None, "a scripted attention summary that was not asked for"
                pooled = fake_pooled(reply.text, call.capture, self.hidden_size)
                out.append(replace(reply, prompt_tokens=len(prompt.split()), hidden=None, pooled=pooled))
            else:
                out.append(self._generation(prompt, reply, call.capture))
        return out

    def _generation(self, prompt: str, text: str, capture: Sequence[int] | None) -> Generation:
        n = len(text.split())
        pieces = re.findall(r"\s*\S+", text)
        return Generation(
            text, list(range(n)), [-0.1] * n, [0.5] * n, len(prompt.split()), None, "stop", pieces=pieces,
            pooled=fake_pooled(text, capture, self.hidden_size),
        )

    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        out = []
        for call in calls:
            self.calls.append(("loglikelihood", call.prompt))
            scores = list(self._next(self.likelihoods, "loglikelihood", call.prompt))
            assert len(scores) == len(call.continuations)
            out.append(scores)
        return out

    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        out = []
        for call in calls:
            prompt, options = call.prompt, call.options
            assert call.prefix is None or prompt.startswith(call.prefix), "prefix must start the prompt"
            self.calls.append(("choose", prompt))
            scores, text = self._next(self.choices, "choose_and_generate", prompt)
            assert len(scores) == len(options)
            index = (call.pick or argmax)(list(scores))
            option = options[index]
            if option.max_new_tokens < 1:
                out.append(Choice(list(scores), index, None, len(prompt.split())))
                continue
            generation = self._generation(prompt + option.label + option.lead, text, None)
            out.append(Choice(list(scores), index, generation, generation.prompt_tokens))
        return out

    def kinds(self) -> list[str]:
        """Which prompt each call answered: "calibrate" (loglikelihood), "route" (choose_and_generate),
        "cot", or "skill_<name>" (a skill writing its output on its own)."""
        names = {"loglikelihood": "calibrate", "choose": "route"}
        return [names.get(kind) or _kind(prompt) for kind, prompt in self.calls]

    @property
    def exhausted(self) -> bool:
        return not self.replies and not self.likelihoods and not self.choices


_ENDINGS = {
    "Rationale:": "cot",
    "Next step: focus\nQuery:": "skill_evidence_focusing",
    "Next step: decompose\nQueries:\n-": "skill_question_decomposition",
    "Next step: rewrite\nQuery:": "skill_query_rewriting",
}


def _kind(prompt: str) -> str:
    return next(kind for ending, kind in _ENDINGS.items() if prompt.endswith(ending))


class FakeProber:
    """Scores in call order; accepts above 0.5 (`cuts`: per stage). Checks the captured layers
    reach it, and records the states it scored."""

    def __init__(
        self,
        scores: Sequence[float],
        layers: Sequence[int] = (2, 4),
        pooling: str = "generated_mean",
        cuts: Mapping[str, float] | None = None,
    ) -> None:
        self.scores = list(scores)
        self._layers = list(layers)
        self.pooling = pooling
        self.cuts = dict(cuts or {"before_retrieval": 0.5, "after_evidence": 0.5})
        self.scored: list[Mapping[int, torch.Tensor]] = []

    @property
    def layers(self) -> list[int]:
        return self._layers

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float:
        assert set(self._layers) <= set(hidden), (
            f"prober layers {self._layers} not captured: {sorted(hidden)}"
        )
        if not self.scores:
            raise AssertionError("FakeProber: no scripted score left")
        self.scored.append(hidden)
        return self.scores.pop(0)

    def accepts(self, score: float, stage: str) -> bool:
        return score > self.cuts[stage]


_WORD = re.compile(r"\w+")
_STOP_TEXT = "a an the of in on to is was were by for and or what who which when where how did do"
_STOP = frozenset(_STOP_TEXT.split())


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class OverlapRetriever:
    """Ranks passages by how many query words they share (ties: corpus order); records queries."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        words = _terms(query)
        scored = [(len(words & _terms(p.contents)), i, p) for i, p in enumerate(self.passages)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [Hit(p, float(score)) for score, _, p in ranked[:k]]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


CORPUS = [
    Passage("cast", "Cast Away", "Cast Away is a 2000 film directed by Robert Zemeckis, starring Tom Hanks."),
    Passage(
        "zemeckis", "Robert Zemeckis", "Robert Zemeckis (born May 14, 1952) is an American film director."
    ),
    Passage("hanks", "Tom Hanks", "Tom Hanks is an American actor known for Forrest Gump and Cast Away."),
    Passage("fedex", "FedEx", "FedEx is an American delivery company founded in 1971."),
    Passage("gump", "Forrest Gump", "Forrest Gump is a 1994 film directed by Robert Zemeckis."),
    Passage("moon", "Apollo 11", "Apollo 11 landed the first humans on the Moon in 1969."),
]


def scripted(
    pieces: Sequence[str],
    probs: Sequence[float] | None = None,
    entropies: Sequence[float] | None = None,
    received: Sequence[float] | None = None,
    prompt_weights: Mapping[str, float] | None = None,
    prompt: str = "",
    stopped_by: str = "stop",
) -> Generation:
    """A generation of exactly these token `pieces`, with these token probabilities (default 0.9)
    and entropies (default 0.1); with `received` (or `prompt_weights`), an attention summary whose
    prompt row, over `prompt` split into words, gives each listed word its weight (others 0)."""
    n = len(pieces)
    probs = list(probs) if probs is not None else [0.9] * n
    entropies = list(entropies) if entropies is not None else [0.1] * n
    summary = None
    if received is not None or prompt_weights is not None:
        words = re.findall(r"\s*\S+", prompt)
        weights = [float((prompt_weights or {}).get(w.strip(), 0.0)) for w in words]
        summary = Attention(list(received or [0.0] * n), weights, words)
    text = "".join(pieces)
    return Generation(
        text, list(range(n)), [math.log(p) for p in probs], entropies, 0, None, stopped_by,
        pieces=list(pieces), attention=summary,
    )


def answer(text: str, reasoning: str = "Thinking.") -> str:
    """A CoT reply as the model would write it after `Rationale:`."""
    return f" {reasoning}\nAnswer: {text}"


_TITLE = re.compile(r"^\[\d+\] ([^:\n]+):", re.MULTILINE)


class RuleLM(RequestLM):
    """Replies by rule from the prompt alone, so any call order and any batching give the same
    replies (runs that answer questions concurrently). A CoT answer names the first passage's
    title (closed-book: the question's last word); a skill or the router writes a query from
    the evidence titles. Records the prompts of each call; `fail` maps a text to the error
    raised by any call whose prompt contains it."""

    name = "rule-lm"
    num_layers = 4
    hidden_size = 8

    def __init__(self, fail: Mapping[str, BaseException] | None = None) -> None:
        self.fail = dict(fail or {})
        self.calls: list[tuple[str, list[str]]] = []  # (kind, prompts)

    def _check(self, prompt: str) -> None:
        for text, error in self.fail.items():
            if text in prompt:
                raise error

    def _reply(self, prompt: str) -> str:
        case = prompt.rsplit("Question: ", 1)[-1] if prompt.endswith("Rationale:") else prompt[-600:]
        titles = _TITLE.findall(prompt.rsplit("\n\n", 2)[-1] if prompt.endswith("Rationale:") else prompt)
        if prompt.endswith("Rationale:"):
            found = titles[0] if titles else case.split("?")[0].split()[-1]
            return f" Read {len(titles)} passages.\nAnswer: {found}"
        return f" {titles[-1] if titles else 'Apollo'} facts {zlib.crc32(case.encode()) % 97}"

    def _generation(self, prompt: str, text: str, capture: Sequence[int] | None) -> Generation:
        n = len(text.split())
        pooled = fake_pooled(prompt[-300:] + text, capture, self.hidden_size)
        return Generation(text, list(range(n)), [-0.1] * n, [0.5] * n, len(prompt.split()), None, "stop", pooled=pooled)

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        self.calls.append(("generate", list(prompts)))
        for prompt in prompts:
            assert call.prefix is None or prompt.startswith(call.prefix), "prefix must start the prompt"
            self._check(prompt)
        return [self._generation(prompt, self._reply(prompt), call.capture) for prompt in prompts]

    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        self.calls.append(("loglikelihood", [call.prompt for call in calls]))
        for call in calls:
            self._check(call.prompt)
        return [[-float(len(c)) for c in call.continuations] for call in calls]

    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        """Scores by rule from the prompt and the label; records one call for the list."""
        self.calls.append(("choose", [call.prompt for call in calls]))
        for call in calls:
            self._check(call.prompt)
        return [self._choose(call) for call in calls]

    def _choose(self, call: ChooseCall) -> Choice:
        prompt = call.prompt
        scores = [-float(zlib.crc32(f"{prompt[-400:]}{o.label}".encode()) % 5) for o in call.options]
        index = (call.pick or argmax)(scores)
        option = call.options[index]
        if option.max_new_tokens < 1:
            return Choice(scores, index, None, len(prompt.split()))
        generation = self._generation(prompt, self._reply(prompt + option.label + option.lead), None)
        return Choice(scores, index, generation, generation.prompt_tokens)


class HashProber:
    """A deterministic prober: P(correct) is a fixed function of the hidden state, so it accepts
    some answers and rejects others whatever order the questions run in."""

    layers: ClassVar[list[int]] = [2, 4]
    pooling = "answer_last"

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float:
        return float(torch.sigmoid(hidden[2].sum() + hidden[4].sum()))

    def accepts(self, score: float, stage: str) -> bool:
        return score > 0.5


def without_latency(value):
    """A trace or metrics document with every `latency_s` removed: wall time is the one thing two
    equal runs do not share."""
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def use_prober(monkeypatch, paths, prober) -> None:
    """The evaluate stages open `prober` as the trained one: `runtime.open_prober` returns it, and
    a stand-in `probe.json` naming its layers lets the stage's check for a trained prober pass (it
    looks for the file before any model loads) and tells it which stored states are read later."""
    import json

    from skillrag.pipeline import runtime

    monkeypatch.setattr(runtime, "open_prober", lambda params, paths, lm, method=None: prober)
    paths.probe.mkdir(parents=True, exist_ok=True)
    (paths.probe / "probe.json").write_text(json.dumps({"layers": list(prober.layers)}))
