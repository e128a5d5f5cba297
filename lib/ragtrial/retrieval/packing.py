"""Context packing and truncation, in one place: how items are rendered for the generator, clipped
to a token count, and cut to a budget (leading items, or batches for map steps).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from ragtrial.llm.tokens import count_tokens, get_encoding
from ragtrial.retrieval.base import ContextItem

# An entry of a rendered context: "[n] (kind) " at a line start (format_context).
_CONTEXT_ENTRY = re.compile(r"(?:\A|\n\n)\[(\d+)\] \([^)\n]*\) ")


def first_occurrences(values: Iterable[int]) -> Iterator[int]:
    """`values` without repeats, in order, lazily (`dict.fromkeys` would consume them all)."""
    seen: set[int] = set()
    for value in values:
        if value not in seen:
            seen.add(value)
            yield value


def tokens_by_kind(items: Sequence[ContextItem]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item.kind] = out.get(item.kind, 0) + count_tokens(item.text)
    return out


EMPTY_CONTEXT = "(no context)"


# ---------------------------------------------------------------- context


def format_context(items: Sequence[ContextItem]) -> str:
    """Numbered context lines as the generator sees them; the kind tells passages from graph facts."""
    if not items:
        return EMPTY_CONTEXT
    return "\n\n".join(f"[{i}] ({item.kind}) {item.text}" for i, item in enumerate(items, start=1))


def context_entries(context_text: str) -> dict[int, str]:
    """The numbered context's entries by number (entries numbered 1, 2, ... in order; a bracketed
    number inside an entry's text is not an entry).
    """
    starts = [m for m in _CONTEXT_ENTRY.finditer(context_text)]
    kept, expected = [], 1
    for m in starts:
        if int(m[1]) == expected:
            kept.append(m)
            expected += 1
    if not kept:  # no context was shown (EMPTY_CONTEXT), or not a rendered context
        return {}
    ends = [m.start() for m in kept[1:]] + [len(context_text)]
    return {int(m[1]): context_text[m.end() : end] for m, end in zip(kept, ends, strict=True)}


def clip_tokens(text: str, n_tokens: int, marker: str = "") -> str:
    """`text` cut to its first `n_tokens` cl100k tokens, with `marker` appended when it was cut."""
    enc = get_encoding()
    tokens = enc.encode_ordinary(text)
    return text if len(tokens) <= n_tokens else enc.decode(tokens[:n_tokens]) + marker


def pack(
    items: Iterable[ContextItem], budget: int, *, clip_first: bool = False, drop_repeats: bool = False
) -> tuple[list[ContextItem], dict[str, int]]:
    """The leading items whose texts fit in `budget` cl100k tokens, and their tokens per kind.

    Packing stops at the first item that does not fit (rank order is the retriever's claim about
    relevance; skipping ahead would let small low-ranked items jump the queue), and reads no item
    after it, so `items` may be a generator. `clip_first`: a first item larger than the whole
    budget is clipped to it, so an oversized passage cannot empty the context (GraphRAG's own
    builders drop it instead). `drop_repeats`: an item whose (kind, text) is already packed (the
    same chunk from two retrievers) is skipped.
    """
    kept: list[ContextItem] = []
    tokens: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    used = 0
    for item in items:
        if drop_repeats and (item.kind, item.text) in seen:
            continue
        n = count_tokens(item.text)
        if used + n > budget:
            if kept or not clip_first:
                break
            item, n = replace(item, text=clip_tokens(item.text, budget)), budget
        seen.add((item.kind, item.text))
        kept.append(item)
        tokens[item.kind] += n
        used += n
    return kept, dict(tokens)


def pack_context(items: Sequence[ContextItem], budget: int) -> tuple[list[ContextItem], dict[str, int]]:
    """What a method shows the generator: `pack` with the first item clipped and repeats dropped."""
    return pack(items, budget, clip_first=True, drop_repeats=True)


def batch_units(units: Sequence[ContextItem], budget: int) -> list[list[ContextItem]]:
    """Consecutive units grouped so each batch's texts fit `budget` tokens (the map steps' inputs);
    an oversized unit is clipped into a batch of its own.
    """
    batches: list[list[ContextItem]] = []
    start = 0
    while start < len(units):
        batch, _ = pack(units[start:], budget, clip_first=True)
        batches.append(batch)
        start += len(batch)
    return batches
