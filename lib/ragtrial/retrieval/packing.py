"""Context packing and truncation, in one place: how items are rendered for the generator, clipped
to a token count, and cut to a budget (leading items, or batches for map steps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from ragtrial.llm.tokens import count_tokens, get_encoding
from ragtrial.retrieval.base import ContextItem


def within_budget(items: Iterable[ContextItem], budget: int) -> list[ContextItem]:
    """The leading items whose texts fit in `budget` cl100k tokens (stops at the first that does not;
    `items` may be a generator, so items past the budget are never built).
    """
    kept, used = [], 0
    for item in items:
        used += count_tokens(item.text)
        if used > budget:
            break
        kept.append(item)
    return kept


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


def truncate_tokens(text: str, n_tokens: int) -> str:
    enc = get_encoding()
    return enc.decode(enc.encode(text, disallowed_special=())[:n_tokens])


def pack_context(items: Sequence[ContextItem], budget: int) -> tuple[list[ContextItem], dict[str, int]]:
    """The best-ranked items whose texts fit in `budget` cl100k tokens, and tokens per kind.

    Packing stops at the first item that does not fit (rank order is the retriever's claim about
    relevance; skipping ahead would let small low-ranked items jump the queue). A first item
    larger than the whole budget is truncated, so an oversized passage cannot empty the context.
    Repeated texts (the same chunk from two retrievers) are shown once.
    """
    kept: list[ContextItem] = []
    tokens: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    used = 0
    for item in items:
        if (item.kind, item.text) in seen:
            continue
        n = count_tokens(item.text)
        if used + n > budget:
            if kept:
                break
            item, n = replace(item, text=truncate_tokens(item.text, budget)), budget
        seen.add((item.kind, item.text))
        kept.append(item)
        tokens[item.kind] += n
        used += n
    return kept, dict(tokens)


def batch_units(units: Sequence[ContextItem], budget: int) -> list[list[ContextItem]]:
    """Consecutive units grouped so each batch's texts fit `budget` tokens (an oversized unit is
    truncated into a batch of its own).
    """
    batches: list[list[ContextItem]] = []
    used = budget + 1  # forces a new batch for the first unit
    for unit in units:
        n = count_tokens(unit.text)
        if n > budget:
            unit, n = replace(unit, text=truncate_tokens(unit.text, budget)), budget
        if used + n > budget:
            batches.append([])
            used = 0
        batches[-1].append(unit)
        used += n
    return batches
