"""A model's chat template around the project's plain prompts (`lm.prompt_format: chat`).

A prompt's last line is the cue its answer continues (`Rationale:`, a router's `Skill:`): it
opens the assistant turn, and everything before it is the user message. The template's text
before the user message (`head`) is the same for every prompt, so `head + prefix` is a prefix of
every framed prompt whose few-shot prefix ends before its last line, and the prefix KV cache
keeps working: the cache reuses only the leading tokens the framed prefix and prompt share, so
results equal the uncached ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from skillrag.errors import ConfigError

_SENTINEL = "\x00skillrag-user-message\x00"


@dataclass(frozen=True)
class ChatFrame:
    head: str  # template text before the user message (system prompt, role markers)
    tail: str  # after it, through the opening of the assistant turn

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, model: str) -> ChatFrame:
        """The frame of `tokenizer`'s chat template for one user message and a generation prompt."""
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"lm.prompt_format is chat, but model {model!r} has no chat template; use plain")
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": _SENTINEL}], tokenize=False, add_generation_prompt=True
        )
        head, found, tail = rendered.partition(_SENTINEL)
        if not found:
            raise ConfigError(f"the chat template of model {model!r} does not show the user message verbatim; use plain")
        return cls(head, tail)

    def wrap(self, prompt: str) -> str:
        """`prompt` in the template: all but its last line as the user message, the last line
        opening the assistant turn."""
        cut = prompt.rfind("\n") + 1
        return self.head + prompt[:cut].rstrip("\n") + self.tail + prompt[cut:]

    def wrap_prefix(self, prefix: str | None, framed: Sequence[str]) -> str | None:
        """The framed form of a few-shot `prefix` of the framed prompts, or None (no cache) when
        a prompt's last line starts inside the prefix (the template splits it)."""
        if prefix is None:
            return None
        head = self.head + prefix
        return head if all(text.startswith(head) for text in framed) else None
