"""The LM protocol over any transformers causal LM with a standard attention KV cache.

Why a hand-written decode loop instead of `model.generate`: it records, from the one model call
per token, the chosen token's log-probability, its entropy and the residual stream of only the
requested layers, pooled per row over the tokens that survive stop-string truncation, three ways
(all of them, and the answer span: `skillrag.lm.base.POOLINGS`), with no second pass over the
sequence; it reuses a cached few-shot prefix KV under padded batches; and it drops
finished rows from the batch. Logits are computed for the last position only, and the KV of
full-attention layers grows in place. On the CPU a step is ~75% matrix products, so per token
this is only ~1.1-1.2x faster than generate's loop; the large savings are batching and the
prefix cache (see benchmarks/lm.py).

Layout of a batch (B rows), left-padded so every row's next token sits in the last column:

    [shared prefix KV (cached) | pad.. body tokens | generated tokens]

Pads are masked out and position ids skip them, so a row's result does not depend on its
neighbours. With a `prefix`, the prompts' token ids are still those of the whole prompt: the
cached prefix KV is used only for the leading tokens the prefix and every prompt tokenize to
alike, so results equal the uncached ones. (One caveat: in sliding-window layers pads between
prefix and body take window slots; results then match exactly only while prompt and answer fit
in the window.)
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Self

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface

from skillrag.lm.base import Attention, Choice, Generation, Stop, answer_tokens, argmax, pool
from skillrag.lm.calls import ChooseCall, GenerateCall, GenerateRequest, RequestLM, ScoreCall
from skillrag.lm.chat import ChatFrame


@dataclass
class _Prefilled:
    """A token sequence run once at batch size 1: its KV per layer (every position kept, so any
    leading part can be reused) and the log-probabilities of the token that follows it."""

    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    next_logprobs: torch.Tensor  # [vocab], float32


class _BufferedLayer(DynamicLayer):
    """A full-attention cache layer whose keys and values live in buffers with room for
    `capacity` positions: appending a token writes in place, where `DynamicLayer` copies the
    whole cache (torch.cat) at every step, which costs ~15% of a batch-8 step on the CPU."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            batch, heads = key_states.shape[:2]
            self._keys = key_states.new_empty(batch, heads, self.capacity, key_states.shape[-1])
            self._values = value_states.new_empty(batch, heads, self.capacity, value_states.shape[-1])
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        self._keys[:, :, start:end] = key_states
        self._values[:, :, start:end] = value_states
        self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        length = self.get_seq_length()
        self._keys, self._values = self._keys[indices], self._values[indices]
        self.keys, self.values = self._keys[:, :, :length], self._values[:, :, :length]


Reused = tuple[_Prefilled | None, int]
"""A row's reused KV: a prefilled sequence and how many of its leading positions the row takes
((None, 0): nothing)."""


def _batch_cache(config, capacity: int, reused: Sequence[Reused], head: int, keep_all: bool = False) -> DynamicCache:
    """A cache for one row per `reused` entry holding that row's reused positions right-aligned in
    the first `head` columns (pads before them), with room for `capacity` positions in its
    full-attention layers; `keep_all`: every layer keeps every position (a config-less cache, as
    a prefill's), so each row's KV can be read back."""
    batch = len(reused)
    shared = len({(id(p), start) for p, start in reused}) == 1
    per_layer = []
    if head:
        sources = [p for p, start in reused if start]
        for layer in range(len(sources[0].kv)):
            keys, values = sources[0].kv[layer]
            if shared:  # one sequence every row reuses alike (a shared few-shot prefix)
                expand = (batch, -1, -1, -1)
                per_layer.append((keys[:, :, :head].expand(expand), values[:, :, :head].expand(expand)))
                continue
            all_keys = keys.new_zeros(batch, keys.shape[1], head, keys.shape[3])
            all_values = values.new_zeros(batch, values.shape[1], head, values.shape[3])
            for row, (prefilled, start) in enumerate(reused):
                if start:
                    row_keys, row_values = prefilled.kv[layer]
                    all_keys[row, :, head - start :] = row_keys[0, :, :start]
                    all_values[row, :, head - start :] = row_values[0, :, :start]
            per_layer.append((all_keys, all_values))
    if keep_all:
        return DynamicCache(per_layer) if per_layer else DynamicCache()
    cache = DynamicCache(config=config)
    cache.layers = [
        _BufferedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    for layer, (keys, values) in zip(cache.layers, per_layer):
        layer.update(keys, values)
    return cache


@dataclass
class _Row:
    """Decoding state of one prompt: its token budget and stops, generated ids, and once done, its
    text and kept-token count."""

    budget: int
    stop: Sequence[Stop] = ()
    ids: list[int] = field(default_factory=list)
    done: bool = False
    stopped_by: str = "length"
    text: str = ""
    kept: int = 0

    def needs_feed(self, step: int, capturing: bool) -> bool:
        """Whether the token chosen at `step` goes back through the model: while the row runs, and
        once more when it just finished but that token's state (or attention row) belongs to the
        kept ones (an empty answer pools its first token's state)."""
        return not self.done or (capturing and max(self.kept, 1) == step + 1)


class _Batch:
    """One batch in flight: KV cache, preallocated attention mask and the next position of each row.

    Row i reuses the KV of its `reused[i]` (the first positions of a prefilled sequence: a shared
    prefix, or its own prompt) and construction runs the rest of the row (its body) in one forward
    pass; `logits` holds that pass's logits. Layout, per row: [pads | reused KV | pads | body]
    with bodies left-padded (`pad_left`) or right-padded (scoring continuations) to the longest.
    """

    def __init__(
        self,
        lm: HFCausalLM,
        rows: list[list[int]],
        reused: Sequence[Reused],
        room: int,
        pad_left: bool,
        logits_to_keep: int,
        keep_all: bool = False,
    ):
        self.model = lm.model
        device = lm.device
        self.starts = [start for _, start in reused]
        bodies = [row[start:] for row, start in zip(rows, self.starts)]
        self.head = head = max(self.starts)
        width = max(len(body) for body in bodies)
        self.length = head + width  # KV positions after the first pass
        self.first_generated = self.length  # the KV column of generated token 0
        self.mask = torch.zeros(len(rows), self.length + room, dtype=torch.bool, device=device)
        self.mask[:, self.length :] = True
        chunk = torch.full((len(rows), width), lm.pad_id, dtype=torch.long)
        self.body_columns = []
        for i, body in enumerate(bodies):
            self.mask[i, head - self.starts[i] : head] = True
            first = width - len(body) if pad_left else 0
            chunk[i, first : first + len(body)] = torch.tensor(body)
            self.mask[i, head + first : head + first + len(body)] = True
            self.body_columns.append(range(head + first, head + first + len(body)))
        body_mask = self.mask[:, head : self.length]
        starts = torch.tensor(self.starts, device=device)[:, None]
        positions = (body_mask.cumsum(-1) - 1).clamp(min=0) + starts
        self.next_position = torch.tensor([[start + len(body)] for start, body in zip(self.starts, bodies)], device=device)
        self.cache = _batch_cache(self.model.config, self.mask.shape[1], reused, head, keep_all)
        out = self.model(
            input_ids=chunk.to(device),
            attention_mask=self.mask[:, : self.length],
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=logits_to_keep,
        )
        self.logits = out.logits

    def columns(self, row: int) -> list[int]:
        """The KV columns of row `row`'s tokens after the first pass: reused, then body."""
        return [*range(self.head - self.starts[row], self.head), *self.body_columns[row]]

    def select(self, rows: torch.Tensor) -> None:
        """Keep only `rows` (indices into the current batch), e.g. to stop computing finished ones."""
        self.cache.batch_select_indices(rows)
        self.mask = self.mask[rows]
        self.next_position = self.next_position[rows]

    def step(self, tokens: torch.Tensor, layers: list[int]):
        """Feed one token per row; the output carries the last-position logits and, when `layers`
        is non-empty, those layers' hidden states (HF indexing) for the fed tokens."""
        self.length += 1
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.mask[:, : self.length],
            position_ids=self.next_position,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
            output_hidden_states=layers or False,
        )
        self.next_position = self.next_position + 1
        return out


TAPPED_ATTENTION = "skillrag_attention_tap"


def _tapped_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tapped layer's attention: its output comes from the model's own implementation
    (`module.untapped`, e.g. sdpa), so the generation is bit for bit the untapped one; beside it,
    the last query position's weights per head, [rows, heads, 1, keys], the only row DRAGIN reads
    (eager attention computed every row of every layer for it)."""
    own = sys.modules[type(module).__module__].eager_attention_forward
    untapped = ALL_ATTENTION_FUNCTIONS.get_interface(module.untapped, own)
    output, _ = untapped(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    keys = repeat_kv(key, module.num_key_value_groups)
    scores = (query[:, :, -1:] @ keys.transpose(2, 3)).float() * scaling
    if attention_mask is not None:
        mask = attention_mask[:, :, -1:, : keys.shape[2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return output, torch.softmax(scores, dim=-1)


AttentionInterface.register(TAPPED_ATTENTION, _tapped_attention)


class _AttentionTap:
    """Reads one attention layer's weights during a generate call: for that call only, the last
    full-attention layer runs `_tapped_attention` (its own config copy names it) and every other
    layer runs as it always does.

    At every forward pass it keeps the last query position's weights, averaged over heads: after
    the prompt pass, each prompt's last position; after each decode step, the fed token's row over
    the generated columns (`generated[row, j, i]`: token j's weight on token i)."""

    def __init__(self, model: PreTrainedModel, rows: int, max_new_tokens: int):
        config = model.config.get_text_config()
        types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
        index = max(i for i, kind in enumerate(types) if kind == "full_attention")
        self.module = model.get_decoder().layers[index].self_attn
        self.generated = torch.zeros(rows, max_new_tokens, max_new_tokens)
        self.last = torch.zeros(0)

    def __enter__(self) -> Self:
        self.shared_config = self.module.config
        tapped = copy.copy(self.shared_config)
        tapped._attn_implementation = TAPPED_ATTENTION
        self.module.config = tapped
        self.module.untapped = self.shared_config._attn_implementation
        self.handle = self.module.register_forward_hook(self._read)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()
        self.module.config = self.shared_config
        del self.module.untapped

    def _read(self, module: torch.nn.Module, args: tuple, output: tuple) -> None:
        self.last = output[1][:, :, -1].mean(dim=1).cpu()  # [rows, keys]

    def record_step(self, live: torch.Tensor, step: int, first_generated: int) -> None:
        self.generated[live.cpu(), step, : step + 1] = self.last[:, first_generated : first_generated + step + 1]

    def summary(self, row: int, prompt: torch.Tensor, pieces: list[str], kept: int) -> Attention:
        received = self.generated[row, :kept, :kept].tril(-1).max(dim=0).values if kept else torch.zeros(0)
        return Attention(received.tolist(), prompt.tolist(), pieces)


class HFCausalLM(RequestLM):
    """A transformers causal LM behind the skillrag `LM` protocol (see `skillrag.lm.base`), serving
    lists of requests in batches (`skillrag.lm.calls.RequestLM`)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        name: str | None = None,
        prefix_cache_size: int = 4,
        chat: bool = False,
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or model.config.name_or_path
        text_config = model.config.get_text_config()
        self.num_layers: int = text_config.num_hidden_layers
        self.hidden_size: int = text_config.hidden_size
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.prefix_cache_size = prefix_cache_size
        self._prefixes: OrderedDict[str, _Prefilled] = OrderedDict()
        # chat: every prompt reaches the model framed by its chat template (lm.prompt_format).
        self.chat = ChatFrame.of(tokenizer, self.name) if chat else None

    @property
    def device(self) -> torch.device:
        return self.model.device

    def encode(self, text: str) -> list[int]:
        """Token ids of a prompt, with the model's special tokens (e.g. gemma's `<bos>`; a chat
        template writes them itself)."""
        return self.tokenizer(text, add_special_tokens=self.chat is None).input_ids

    def _format(self, prompts: Sequence[str], prefix: str | None) -> tuple[list[str], str | None]:
        """Prompts and their shared prefix as the model reads them: as given in the plain format,
        framed by the model's chat template in the chat format."""
        for prompt in prompts:
            if prefix is not None and not prompt.startswith(prefix):
                raise ValueError(f"prompt does not start with the given prefix: {prompt[:80]!r}")
        if self.chat is None:
            return list(prompts), prefix
        framed = [self.chat.wrap(prompt) for prompt in prompts]
        return framed, self.chat.wrap_prefix(prefix, framed)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        """Greedy-decode every prompt in one batch. See `skillrag.lm.base.LM.generate` and
        `serve_generate_calls`."""
        [generations] = self.serve_generate_calls([(call, prompts)])
        return generations

    @torch.inference_mode()
    def serve_generate_calls(self, requests: Sequence[GenerateRequest]) -> list[list[Generation]]:
        """Greedy-decode every prompt of every request in one batch, each row to its own call's
        budget (the calls may differ in nothing else: `GenerateCall.batch_group`).

        A row ends at EOS (not kept), at a stop string (text cut before it; tokens that start after
        the cut are dropped) or after its `max_new_tokens`. Hidden states are pooled over the kept
        tokens (`Generation.pooled`); an empty answer is represented by the state of its first
        generated token.
        `extra["cached_prompt_tokens"]` counts the prompt tokens taken from the prefix cache.
        With `attention`, the call also summarises the last full-attention layer's weights
        (`skillrag.lm.base.Attention`, read by `_AttentionTap`); its tokens are those of the same
        call without it.
        """
        if not requests:
            return []
        call = requests[0][0]
        if any(other.batch_group() != call.batch_group() for other, _ in requests):
            raise ValueError("generate calls served in one batch may differ in their max_new_tokens only")
        if any(other.max_new_tokens < 1 for other, _ in requests):
            raise ValueError("max_new_tokens must be at least 1")
        budgets = [other.max_new_tokens for other, prompts in requests for _ in prompts]
        if not budgets:
            return [[] for _ in requests]
        layers = self._check_layers(call.capture)
        prompts, prefix = self._format([prompt for _, prompts in requests for prompt in prompts], call.prefix)
        ids = [self.encode(prompt) for prompt in prompts]
        if not all(ids):
            raise ValueError("every prompt needs at least one token")
        reused = self._shared_prefix(prefix, prompts, ids)
        rows = [_Row(budget, call.stop) for budget in budgets]
        made = iter(self._generate(ids, [reused] * len(ids), rows, layers, call.attention))
        return [[next(made) for _ in asked] for _, asked in requests]

    def _generate(
        self,
        ids: list[list[int]],
        reused: Sequence[Reused],
        rows: list[_Row],
        layers: list[int],
        attention: bool = False,
    ) -> list[Generation]:
        """Decode every row of `ids` (each to its `rows` entry's budget and stops), reusing the KV
        of its `reused` entry."""
        budget = max(row.budget for row in rows)
        tap = _AttentionTap(self.model, len(ids), budget) if attention else None
        with tap or nullcontext():
            batch = _Batch(self, ids, reused, budget, pad_left=True, logits_to_keep=1)
            prompt_rows = tap.last if tap is not None else None
            logprobs, entropies, states = self._decode(batch, rows, layers, tap)

        results = []
        for i, row in enumerate(rows):
            pooled = self._pool(states[i], row, layers) if states is not None else None
            summary = None
            if tap is not None and prompt_rows is not None:
                summary = tap.summary(i, prompt_rows[i, batch.columns(i)], [self.decode([t]) for t in ids[i]], row.kept)
            results.append(
                Generation(
                    text=row.text,
                    token_ids=row.ids[: row.kept],
                    logprobs=logprobs[i][: row.kept],
                    entropies=entropies[i][: row.kept],
                    prompt_tokens=len(ids[i]),
                    stopped_by=row.stopped_by,
                    extra={"cached_prompt_tokens": float(reused[i][1])},
                    pieces=[self.decode([t]) for t in row.ids[: row.kept]],
                    attention=summary,
                    pooled=pooled,
                )
            )
        return results

    def _pool(self, states: torch.Tensor, row: _Row, layers: list[int]) -> dict[str, dict[int, torch.Tensor]]:
        """A row's per-token states ([max_new_tokens, layers, hidden]) pooled every way over its
        kept tokens (`skillrag.lm.base.pool`); an empty answer is represented by the state of its
        first generated token. Token boundaries come from decoding each prefix of the kept ids,
        which is how `text` itself was decoded."""
        ends = [len(self.decode(row.ids[: j + 1])) for j in range(row.kept)]
        return pool(states[: max(row.kept, 1)], answer_tokens(row.text, ends), layers)

    def _decode(
        self,
        batch: _Batch,
        rows: list[_Row],
        layers: list[int],
        tap: _AttentionTap | None = None,
    ) -> tuple[list[list[float]], list[list[float]], torch.Tensor | None]:
        """The greedy loop, filling `rows`: per row, its tokens' log-probs and entropies, and
        (when `layers`) the hidden states of each generated token, [rows, budget, layers, hidden];
        `tap` records each fed token's attention row.

        The state of token t comes from the step that feeds t back in. Rows leave the batch once
        finished and once the states of all their kept tokens are recorded.
        """
        device, size = self.device, len(rows)
        budget = max(row.budget for row in rows)
        logprobs = torch.zeros(size, budget, device=device)
        entropies = torch.zeros(size, budget, device=device)
        states = None
        if layers:
            shape = (size, budget, len(layers), self.hidden_size)
            states = torch.zeros(shape, dtype=self.model.dtype, device=device)
        live = torch.arange(size, device=device)  # the rows still in the batch, in batch order
        logits = batch.logits[:, -1]
        for step in range(budget):
            scores = torch.log_softmax(logits.float(), dim=-1)
            chosen = scores.argmax(dim=-1)
            logprobs[live, step] = scores.gather(1, chosen[:, None])[:, 0]
            entropies[live, step] = torch.special.entr(scores.exp()).sum(dim=-1)
            live_rows = live.tolist()
            for i, token in zip(live_rows, chosen.tolist()):
                self._advance(rows[i], token)
            feed = [j for j, i in enumerate(live_rows) if rows[i].needs_feed(step, bool(layers) or tap is not None)]
            if not feed:
                break
            if len(feed) < len(live_rows):
                keep = torch.tensor(feed, device=device)
                batch.select(keep)
                live, chosen = live[keep], chosen[keep]
            out = batch.step(chosen, layers)
            if tap is not None:
                tap.record_step(live, step, batch.first_generated)
            if states is not None:
                states[live, step] = torch.stack([out.hidden_states[layer][:, -1] for layer in layers], dim=1)
            logits = out.logits[:, -1]
        return logprobs.tolist(), entropies.tolist(), states

    @torch.inference_mode()
    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        """Summed log-probability of each continuation's tokens after its prompt, per call.

        Prompt and continuation are tokenized separately (the continuation without special
        tokens); the prompts run in one batch, and every continuation of every call is scored in
        one batch on top of its prompt's KV.
        """
        ids = [self.encode(self._format([call.prompt], None)[0][0]) for call in calls]
        if not all(ids):
            raise ValueError("loglikelihood needs a prompt with at least one token")
        conts = [[self._continuation_ids(text) for text in call.continuations] for call in calls]
        return self._score(self._prefill_rows(ids, None, 0), conts)

    @torch.inference_mode()
    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        """Score each call's option labels on one run of its prompt, pick one, and generate after
        it. See `skillrag.lm.base.LM.choose_and_generate`.

        The prompts run in one batch per prefix (their leading `prefix` tokens from the prefix
        cache); every call's labels are scored in one batch on its prompt's KV, exactly as
        `loglikelihood` scores them; then every call whose chosen option generates feeds that
        label's and lead's tokens on its prompt's KV, all in one batch, and decodes greedily, as
        `generate` does for the text prompt + label + lead (label and lead are tokenized on their
        own, like loglikelihood's continuations).
        """
        if any(not call.options for call in calls):
            raise ValueError("choose_and_generate needs at least one option")
        prompts, ids, prefilled = [], [], [None] * len(calls)
        by_prefix: dict[str | None, list[int]] = {}
        for i, call in enumerate(calls):
            [prompt], prefix = self._format([call.prompt], call.prefix)
            prompts.append(prompt)
            ids.append(self.encode(prompt))
            by_prefix.setdefault(prefix, []).append(i)
        if not all(ids):
            raise ValueError("choose_and_generate needs a prompt with at least one token")
        for prefix, group in by_prefix.items():
            cached, start = self._shared_prefix(prefix, [prompts[i] for i in group], [ids[i] for i in group])
            for i, made in zip(group, self._prefill_rows([ids[i] for i in group], cached, start)):
                prefilled[i] = made
        labels = [[self._continuation_ids(option.label) for option in call.options] for call in calls]
        scores = self._score(prefilled, labels)
        picked = [(call.pick or argmax)(row) for call, row in zip(calls, scores)]
        go = [i for i, call in enumerate(calls) if call.options[picked[i]].max_new_tokens >= 1]
        fed = {
            i: ids[i] + labels[i][picked[i]] + self._continuation_ids(calls[i].options[picked[i]].lead) for i in go
        }
        made: dict[int, Generation] = {}
        if go:
            # at least one token is fed to start decoding
            reused = [(prefilled[i], min(len(ids[i]), len(fed[i]) - 1)) for i in go]
            rows = [_Row(calls[i].options[picked[i]].max_new_tokens, calls[i].options[picked[i]].stop) for i in go]
            made = dict(zip(go, self._generate([fed[i] for i in go], reused, rows, [])))
        return [
            Choice(scores[i], picked[i], made.get(i), len(fed[i]) if i in made else len(ids[i]))
            for i in range(len(calls))
        ]

    def _continuation_ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def _prefill_rows(self, ids: list[list[int]], cached: _Prefilled | None, start: int) -> list[_Prefilled]:
        """Each row of `ids` run as `_prefill` runs it (its first `start` positions from `cached`),
        several rows in one left-padded batch; one row exactly as `_prefill`."""
        if len(ids) == 1:
            return [self._prefill(ids[0], cached, start)]
        batch = _Batch(self, ids, [(cached, start)] * len(ids), 0, pad_left=True, logits_to_keep=1, keep_all=True)
        next_logprobs = torch.log_softmax(batch.logits[:, -1].float(), dim=-1)
        made = []
        for i, row in enumerate(ids):
            columns = torch.tensor(batch.columns(i), device=self.device)
            kv = [(layer.keys[i : i + 1, :, columns], layer.values[i : i + 1, :, columns]) for layer in batch.cache.layers]
            made.append(_Prefilled(row, kv, next_logprobs[i]))
        return made

    def _score(self, prefilled: Sequence[_Prefilled], conts: list[list[list[int]]]) -> list[list[float]]:
        """Summed log-probability of each continuation `conts[i][j]` after the prefilled prompt
        `prefilled[i]`, every non-empty one in one batch (an empty one scores 0)."""
        where = [(i, j) for i, row in enumerate(conts) for j, cont in enumerate(row) if cont]
        totals = [[0.0] * len(row) for row in conts]
        if not where:
            return totals
        rows = [prefilled[i].ids + conts[i][j] for i, j in where]
        reused = [(prefilled[i], len(prefilled[i].ids)) for i, _ in where]
        batch = _Batch(self, rows, reused, 0, pad_left=False, logits_to_keep=0)
        # The distribution over continuation token t is the prompt's next-token one for t = 0,
        # and the batch's logits at body column t - 1 after that.
        scores = torch.log_softmax(batch.logits.float(), dim=-1)
        for r, (i, j) in enumerate(where):
            cont = torch.tensor(conts[i][j], dtype=torch.long, device=scores.device)
            dist = torch.cat([prefilled[i].next_logprobs[None], scores[r, : len(cont) - 1]])
            totals[i][j] = dist[torch.arange(len(cont), device=scores.device), cont].sum().item()
        return totals

    def _check_layers(self, capture: Sequence[int] | None) -> list[int]:
        layers = list(capture or [])
        bad = [layer for layer in layers if not 1 <= layer <= self.num_layers]
        if bad:
            raise ValueError(f"capture layers {bad} outside 1..{self.num_layers}")
        return layers

    def _advance(self, row: _Row, token: int) -> None:
        """Record one chosen token and decide whether the row is finished, and why."""
        if row.done:
            return
        if token in self.eos_ids:
            row.done, row.stopped_by, row.kept = True, "eos", len(row.ids)
            row.text = self.decode(row.ids)
            return
        row.ids.append(token)
        if row.stop:
            text = self.decode(row.ids)
            cut = _stop_cut(text, row.stop)
            if cut is not None:
                row.done, row.stopped_by, row.text = True, "stop", text[:cut]
                row.kept = self._tokens_covering(row.ids, cut)
                return
        if len(row.ids) == row.budget:
            row.done, row.stopped_by, row.kept = True, "length", len(row.ids)
            row.text = self.decode(row.ids)

    def _tokens_covering(self, ids: list[int], chars: int) -> int:
        """The fewest leading tokens whose text reaches `chars` characters (0 for 0)."""
        count = len(ids)
        while count > 0 and len(self.decode(ids[: count - 1])) >= chars:
            count -= 1
        return count

    def _shared_prefix(self, prefix: str | None, prompts: Sequence[str], ids: list[list[int]]) -> Reused:
        """The cached run of `prefix` and how many leading tokens of it every prompt shares
        (at least one body token is left per prompt); (None, 0) when nothing can be reused."""
        if prefix is None:
            return None, 0
        prefilled = self._prefixes.get(prefix)
        if prefilled is None:
            prefilled = self._prefill(self.encode(prefix))
            self._prefixes[prefix] = prefilled
            if len(self._prefixes) > self.prefix_cache_size:
                self._prefixes.popitem(last=False)
        self._prefixes.move_to_end(prefix)
        start = min(min(_common_length(prefilled.ids, row), len(row) - 1) for row in ids)
        return (prefilled, start) if start > 0 else (None, 0)

    def _prefill(self, ids: list[int], cached: _Prefilled | None = None, start: int = 0) -> _Prefilled:
        """Run `ids` at batch size 1, taking the first `start` positions from `cached` when given."""
        # A config-less DynamicCache keeps every position in every layer (also sliding-window ones).
        if cached is None or start == 0:
            cache, start = DynamicCache(), 0
        else:
            cache = DynamicCache([(keys[:, :, :start], values[:, :, :start]) for keys, values in cached.kv])
        positions = torch.arange(start, len(ids), device=self.device)[None]
        out = self.model(
            input_ids=torch.tensor([ids[start:]], device=self.device),
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        kv = [(layer.keys, layer.values) for layer in cache.layers]
        return _Prefilled(ids, kv, torch.log_softmax(out.logits[0, -1].float(), dim=-1))


def _stop_cut(text: str, stop: Sequence[Stop]) -> int | None:
    """Where `text` ends under `stop` (see `skillrag.lm.base.Stop`), None while nothing matches."""
    cuts = []
    for item in stop:
        if isinstance(item, str):
            cuts.append(text.find(item) if item in text else None)
        else:
            match = item.search(text)
            cuts.append(match.end() if match else None)
    return min((cut for cut in cuts if cut is not None), default=None)


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# Tokens that end a turn or a document in the model families used here. Qwen2.5's tokenizer says
# its eos is `<|im_end|>`, but the instruct models end plain text with `<|endoftext|>`, and a
# GGUF conversion's generation config does not always list it: missed, a row runs to the budget.
END_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "<end_of_turn>", "<eos>", "</s>")


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """End-of-sequence ids: the generation config's (int or list), the tokenizer's, and those of
    the END_TOKENS the tokenizer has as special (added) tokens."""
    ids: set[int] = set()
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.add(config_eos)
    elif config_eos is not None:
        ids.update(config_eos)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    added = tokenizer.get_added_vocab()
    ids.update(added[token] for token in END_TOKENS if token in added)
    if not ids:
        raise ValueError("the model has no end-of-sequence token in its generation config or tokenizer")
    return ids
