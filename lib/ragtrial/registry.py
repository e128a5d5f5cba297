"""One registry shape for every extension point: methods, retrievers, data loaders, metrics, notebooks.

An entry has a name, a description, metadata (what a caller decides from: a metric's direction
and paired test, a data set's publication), and its target: the object itself, or a
"module:attribute" string resolved on first use, so that naming a retriever does not import
llama-index. An unknown name is an error that lists the known ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import pandas as pd

T = TypeVar("T")


def resolve(dotted: str) -> Any:
    """The object a "module:attribute" string names, imported now."""
    module, attribute = dotted.split(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass
class Entry(Generic[T]):
    name: str
    description: str
    target: T | str
    metadata: dict[str, Any] = field(default_factory=dict)

    def load(self) -> T:
        """The registered object (imported now if it was registered by its dotted path)."""
        if isinstance(self.target, str):
            self.target = resolve(self.target)
        return cast(T, self.target)  # a dotted path was resolved above


class Registry(Generic[T]):
    """Named entries of one kind, in registration order."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def add(self, name: str, target: T | str, description: str, **metadata: Any) -> Entry[T]:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        entry = Entry(name, description, target, metadata)
        self._entries[name] = entry
        return entry

    def register(self, name: str, description: str, **metadata: Any) -> Callable[[T], T]:
        """Decorator form of `add`."""

        def add(target: T) -> T:
            self.add(name, target, description, **metadata)
            return target

        return add

    def remove(self, name: str) -> None:
        """Take entry `name` out (a test's temporary entry)."""
        self.entry(name)
        del self._entries[name]

    def entry(self, name: str) -> Entry[T]:
        if name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}")
        return self._entries[name]

    def get(self, name: str) -> T:
        return self.entry(name).load()

    def unknown(self, names: list[str]) -> list[str]:
        return [n for n in names if n not in self._entries]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def table(self) -> pd.DataFrame:
        """One row per entry: name, description and the metadata keys as columns."""
        return pd.DataFrame(
            [{"name": e.name, "description": e.description, **e.metadata} for e in self._entries.values()]
        )
