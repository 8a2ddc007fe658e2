"""Methods by name, FlashRAG-style: `build_method(params-chosen name, components)`.

The methods are declared in skillrag.registry; each one's module is imported only when its class
is first asked for (`METHODS[name]`), so code that runs one method imports, and its DVC stage
depends on, that method's code and no other (skillrag.pipeline.dvc_yaml adds the module of each method a
stage builds by name to the stage's code).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from skillrag import registry
from skillrag.methods.base import Components, Method


class _Methods(Mapping[str, type[Method]]):
    """name -> Method class, importing the class's module on first access."""

    def __getitem__(self, name: str) -> type[Method]:
        entry = registry.METHODS[name]
        return getattr(import_module(f"skillrag.methods.{entry.module}"), entry.cls)

    def __iter__(self) -> Iterator[str]:
        return iter(registry.METHODS)

    def __len__(self) -> int:
        return len(registry.METHODS)


METHODS: Mapping[str, type[Method]] = _Methods()


def build_method(name: str, components: Components) -> Method:
    registry.check_methods([name])
    return METHODS[name](components)
