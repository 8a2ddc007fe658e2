"""Methods by name, FlashRAG-style: `build_method(params-chosen name, components)`.

Each method's module is imported only when its class is first asked for (`METHODS[name]`), so
code that runs one method imports, and its DVC stage depends on, that method's code and no other
(`evaluate@<method>`; tests/test_dvc_yaml.py adds `MODULES[name]`'s import closure to the stage's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from skillrag.errors import ConfigError
from skillrag.methods.base import Components, Method

# method name -> (module under skillrag.methods, class), in the order runs and reports list them
MODULES: dict[str, tuple[str, str]] = {
    "no_retrieval": ("simple", "NoRetrieval"),
    "single_step": ("simple", "SingleStep"),
    "probing_rag": ("probing_rag", "ProbingRAG"),
    "skill_rag": ("skill_rag", "SkillRAG"),
    "ircot": ("ircot", "IRCoT"),
    "adaptive_rag": ("adaptive_rag", "AdaptiveRAG"),
    "flare": ("flare", "Flare"),
    "dragin": ("dragin", "Dragin"),
    "entropy_rag": ("entropy_rag", "EntropyRAG"),
}


class _Methods(Mapping[str, type[Method]]):
    """name -> Method class, importing the class's module on first access."""

    def __getitem__(self, name: str) -> type[Method]:
        if name not in MODULES:
            raise KeyError(name)
        module, cls = MODULES[name]
        return getattr(import_module(f"skillrag.methods.{module}"), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


METHODS: Mapping[str, type[Method]] = _Methods()


def build_method(name: str, parts: Components) -> Method:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r} (choose from {', '.join(METHODS)})")
    return METHODS[name](parts)
