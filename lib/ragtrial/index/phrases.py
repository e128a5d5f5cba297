"""Noun phrases from raw text without a tagger model: the entity finder of the NLP graph path.

No spaCy/TextBlob model can be downloaded here, so names are found by rule: runs of capitalised
words (with connectors such as "of"/"de") are proper nouns, and — optionally — short runs of
lower-case content words are common noun phrases. Sentences come from NLTK's punkt tables and
stop words from NLTK's list, both in the copy llama-index-core ships for offline use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from importlib.util import find_spec
from pathlib import Path


def _llama_static(folder: str) -> Path:
    # llama-index-core ships NLTK data offline; find_spec locates it without importing the package.
    spec = find_spec("llama_index.core")
    if spec is None or spec.origin is None:
        raise RuntimeError("llama-index-core is not installed; it provides the offline NLTK data")
    return Path(spec.origin).parent / "_static" / folder


@cache
def _sentence_splitter():
    import nltk
    from nltk.tokenize import PunktTokenizer

    nltk_dir = str(_llama_static("nltk_cache"))
    if nltk_dir not in nltk.data.path:
        nltk.data.path.append(nltk_dir)
    return PunktTokenizer("english")


@cache
def stop_words() -> frozenset[str]:
    words = (_llama_static("nltk_cache") / "corpora" / "stopwords" / "english").read_text().split()
    # Spoken-transcript fillers and honorific abbreviations are capitalised often but name nobody.
    return frozenset(words) | {"yeah", "okay", "ok", "oh", "uh", "um", "hmm", "mr", "mrs", "ms", "dr"}


_TOKEN = re.compile(r"\w+(?:['’\-.&]\w+)*")
_POSSESSIVE = re.compile(r"['’]s$")
_SPACES = re.compile(r"[ \t]+")
_CLAUSE_BREAK = re.compile(r"[:;.!?\n\"“(\[—–]")
# Lower-case words allowed between capitalised words of one name ("Bank of the West", "Behind the Tech").
_CONNECTORS = frozenset(
    {"of", "the", "for", "de", "del", "della", "der", "den", "di", "da", "du", "la", "le", "van", "von", "y"}
)
_MAX_NAME_WORDS = 6


def _glued(sentence: str, tokens: list[re.Match], first: int, last: int) -> bool:
    """Tokens first..last are separated by spaces only (a newline or punctuation ends a name)."""
    return all(
        _SPACES.fullmatch(sentence[tokens[m].end() : tokens[m + 1].start()]) for m in range(first, last)
    )


def _fold(token: str) -> str:
    return token.replace("’", "'").casefold()


def _proper_nouns(sentence: str, tokens: list[re.Match], lower_vocab: set[str]) -> list[str]:
    stops = stop_words()

    def clause_initial(m: int) -> bool:
        return m == 0 or bool(_CLAUSE_BREAK.search(sentence[tokens[m - 1].end() : tokens[m].start()]))

    def cannot_start(m: int) -> bool:
        # A clause-initial word the corpus also writes in lower case ("Well", "Honestly") is
        # capitalised by position, not because it names something.
        word = _fold(tokens[m][0])
        return word in stops or word in _CONNECTORS or (clause_initial(m) and word in lower_vocab)

    names, i = [], 0
    while i < len(tokens):
        if not tokens[i][0][0].isupper():
            i += 1
            continue
        j = i  # extend over "Cap (connector* Cap)*"; a possessive ("Scott's") ends the name
        while j - i + 1 < _MAX_NAME_WORDS and not _POSSESSIVE.search(tokens[j][0]):
            k = j + 1
            while k < len(tokens) and tokens[k][0] in _CONNECTORS:
                k += 1
            if k == len(tokens) or not tokens[k][0][0].isupper() or not _glued(sentence, tokens, j, k):
                break
            j = k
        first, last, i = i, j, j + 1
        while first <= last and cannot_start(first):
            first += 1
        while last >= first and (_fold(tokens[last][0]) in stops or tokens[last][0] in _CONNECTORS):
            last -= 1
        if first > last:
            continue
        word = tokens[first][0]
        # A lone all-caps common word ("[MUSIC]", "IT") is emphasis, not an acronym.
        if first == last and word.isupper() and _fold(word) in lower_vocab:
            continue
        end = tokens[last].end() - (2 if _POSSESSIVE.search(tokens[last][0]) else 0)
        names.append(sentence[tokens[first].start() : end])
    return names


def _common_noun_phrases(sentence: str, tokens: list[re.Match]) -> list[str]:
    """RAKE-style candidates: maximal runs of lower-case content words between stop words or
    punctuation, cut to their last three words (an English noun phrase ends in its head noun).
    Without a tagger this also yields verb phrases, hence off by default.
    """
    stops = stop_words()
    content = [
        t[0].isalpha() and t[0].islower() and len(t[0]) > 2 and _fold(t[0]) not in stops for t in tokens
    ]
    phrases, i = [], 0
    while i < len(tokens):
        k = i
        while k < len(tokens) and content[k] and (k == i or _glued(sentence, tokens, k - 1, k)):
            k += 1
        if k - i >= 2:
            phrases.append(sentence[tokens[max(i, k - 3)].start() : tokens[k - 1].end()])
        i = max(k, i + 1)
    return phrases


def noun_phrases(sentence: str, lower_vocab: set[str], common_nouns: bool = False) -> list[tuple[str, str]]:
    """(surface, type) of the noun phrases of one sentence, in order of kind."""
    tokens = list(_TOKEN.finditer(sentence))
    found = [(name, "proper_noun") for name in _proper_nouns(sentence, tokens, lower_vocab)]
    if common_nouns:
        found += [(phrase, "noun_phrase") for phrase in _common_noun_phrases(sentence, tokens)]
    return found


def sentences(text: str) -> list[str]:
    return _sentence_splitter().tokenize(text)


def lower_case_vocabulary(texts: Iterable[str]) -> set[str]:
    """Words the corpus writes in lower case somewhere: evidence that a capitalised occurrence at a
    clause start is a common word, not a name.
    """
    return {_fold(w) for text in texts for w in _TOKEN.findall(text) if w[0].islower()}
