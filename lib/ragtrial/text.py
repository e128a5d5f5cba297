"""Text normalization shared across the flow (question de-duplication, answer metrics, claims).

`normalize_answer` is the official SQuAD v1.1 / HotpotQA answer normalization; it lives beneath
the stages because question generation (de-duplicating questions) and evaluation (EM / F1, claim
declines) must normalize the same way.
"""

from __future__ import annotations

import re
import string

_ASCII_PUNCTUATION = frozenset(string.punctuation)  # the official scripts remove ASCII punctuation only
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalization in the official order: lowercase, punctuation, articles, whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def occurs_as_words(phrase: str, text: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words ("Ann" is not in "Annex"); both already
    normalized the same way. An empty phrase occurs nowhere.
    """
    return bool(phrase) and re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None
