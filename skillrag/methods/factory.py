"""Methods by name, FlashRAG-style: `build_method(params-chosen name, components)`."""

from __future__ import annotations

from skillrag.errors import ConfigError
from skillrag.methods.adaptive_rag import AdaptiveRAG
from skillrag.methods.base import Components, Method
from skillrag.methods.dragin import Dragin
from skillrag.methods.entropy_rag import EntropyRAG
from skillrag.methods.flare import Flare
from skillrag.methods.ircot import IRCoT
from skillrag.methods.probing_rag import ProbingRAG
from skillrag.methods.simple import NoRetrieval, SingleStep
from skillrag.methods.skill_rag import SkillRAG

METHODS: dict[str, type[Method]] = {
    m.name: m
    for m in (
        NoRetrieval,
        SingleStep,
        ProbingRAG,
        SkillRAG,
        IRCoT,
        AdaptiveRAG,
        Flare,
        Dragin,
        EntropyRAG,
    )
}


def build_method(name: str, parts: Components) -> Method:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r} (choose from {', '.join(METHODS)})")
    return METHODS[name](parts)
