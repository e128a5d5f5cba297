"""Multi-hop QA loaders: MultiHop-RAG and the HippoRAG-format sets (MuSiQue, HotpotQA, 2WikiMultihopQA)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragtrial.data.reading import (
    FieldReader,
    _answers,
    _is_strings,
    _read_json,
    _stable_hash,
    dedupe,
    is_kind,
    json_array,
    type_name,
)
from ragtrial.data.registry import DocsAndQuestions, check_unique, register_loader, unique_questions
from ragtrial.records import DataError, Document, GoldEdge, Question

# ---------------------------------------------------------------- MultiHop-RAG

_MULTIHOP_TYPES = {
    "inference_query": "inference",
    "comparison_query": "comparison",
    "temporal_query": "temporal",
    "null_query": "null",
}
_NULL_ANSWER = "Insufficient information."


def _iso_timestamp(rec: FieldReader, key: str) -> str:
    # The HF re-export renders timestamps as "2023-11-27 08:45:59.000000000Z" (UTC, nanoseconds).
    value = rec.text(key)
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|\+00:00)", value)
    if not match:
        raise rec.error(key, f"not a UTC timestamp: {value!r}")
    return f"{match[1]}T{match[2]}+00:00"


def _multihop_document(rec: FieldReader) -> Document:
    published = _iso_timestamp(rec, "published_at")
    author = rec.get("author", (str, type(None)))  # 64 articles have no author
    return Document(
        doc_id=f"mhr-{_stable_hash(rec.text('url'))}",
        title=rec.text("title"),
        text=rec.text("body"),
        source=rec.text("source"),
        date=published[:10],
        metadata={
            "url": rec.get("url"),
            "author": author,
            "category": rec.get("category"),
            "published_at": published,
        },
    )


class _ArticleIndex:
    """Resolves a MultiHop-RAG evidence item to its article by url and by title (both are unique)."""

    def __init__(self, records: list[FieldReader], documents: list[Document]):
        self.by_url = {d.metadata["url"]: d.doc_id for d in documents}
        self.by_title = {d.title: d.doc_id for d in documents}
        check_unique(
            ((d.title, r) for r, d in zip(records, documents, strict=True)), "title", "article title"
        )

    def resolve(self, evidence: FieldReader) -> str:
        title, url = evidence.text("title"), evidence.get("url")
        by_url, by_title = self.by_url.get(url), self.by_title.get(title)
        if by_url is None:
            if by_title is None:
                raise evidence.error(
                    "title", f"matches no document in corpus.json by title or url ({title!r})"
                )
            return by_title
        if by_title is not None and by_title != by_url:
            raise evidence.error("url", f"title and url name different documents ({by_title}, {by_url})")
        return by_url


def _multihop_question(rec: FieldReader, articles: _ArticleIndex) -> Question:
    raw_type = rec.one_of("question_type", _MULTIHOP_TYPES, "type")
    evidence = [(ev, articles.resolve(ev)) for ev in rec.items("evidence_list")]
    answer = rec.text("answer")
    return Question(
        question_id=f"mhr-q{rec.record:04d}",
        question=rec.text("query"),
        answers=[answer],
        question_type=_MULTIHOP_TYPES[raw_type],
        # Several facts often come from one article: gold is the set of articles, in evidence order.
        gold_doc_ids=dedupe(doc_id for _, doc_id in evidence),
        metadata={
            "is_null": answer == _NULL_ANSWER,
            "evidence": [{"doc_id": doc_id, "fact": ev.get("fact")} for ev, doc_id in evidence],
        },
    )


@register_loader("multihop_rag")
def _multihop_rag(root: Path) -> DocsAndQuestions:
    """MultiHop-RAG: corpus.json (609 news articles) + MultiHopRAG.json (2,556 queries).

    doc_id = "mhr-" + sha1(url)[:12] (the corpus has no ids; the url is the article's natural key and
    survives re-exports that reorder the array). question_id = "mhr-q<index>". question_type drops the
    "_query" suffix. Evidence items resolve to articles by url and title (they must agree); the gold
    documents are the distinct evidence articles. date = ISO date of published_at (full UTC timestamp in
    metadata). Null queries (answer "Insufficient information.") get metadata is_null=True. Query
    texts are unique (a repeated one raises DataError).
    """
    records = json_array(root / "corpus.json")
    documents = [_multihop_document(r) for r in records]
    check_unique(((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "url", "article url")
    articles = _ArticleIndex(records, documents)
    pairs = [(r, _multihop_question(r, articles)) for r in json_array(root / "MultiHopRAG.json")]
    # The ids are positions, so a repeated record would load twice: the query text is the natural key.
    check_unique(((q.question, r) for r, q in pairs), "query", "query")
    return documents, [q for _, q in pairs]


# ---------------------------------------------------------------- passage corpora (HippoRAG-style)


class _PassageIndex:
    """One passage = one Document, id "<title>#<k>" (k-th passage with that title in corpus order).

    The id is readable, stable under appending to the corpus, and unique even when a title repeats
    (MuSiQue has 85 titles with several passages).
    """

    def __init__(self, path: Path):
        self.path = path
        self.documents: list[Document] = []
        self.by_key: dict[tuple[str, str], str] = {}
        self.by_title: dict[str, list[str]] = {}
        for rec, title, text in self._passages(path):
            self._add(rec, title, text)

    @staticmethod
    def _passages(path: Path) -> list[tuple[FieldReader, str, str]]:
        # HippoRAG ships two shapes: [{"title", "text"}] and {title: [sentence, …]}.
        data = _read_json(path)
        if isinstance(data, list):
            recs = [FieldReader(path, i, v) for i, v in enumerate(data)]
            return [(r, r.get("title"), r.text("text")) for r in recs]
        if isinstance(data, dict):
            recs = [FieldReader(path, title, v) for title, v in data.items()]
            for r in recs:
                if not _is_strings(r.value):
                    raise r.error(None, f"expected a list of sentences, got {type_name(r.value)}")
            return [(r, str(r.record), "".join(r.value)) for r in recs]
        raise DataError(str(path), None, None, f"expected a JSON array or object, got {type_name(data)}")

    def _add(self, rec: FieldReader, title: str, text: str) -> None:
        if not text.strip():
            raise rec.error("text", "empty passage")
        if (title, text) in self.by_key:
            raise rec.error(
                "text", f"duplicate passage (same title and text as {self.by_key[title, text]!r})"
            )
        same_title = self.by_title.setdefault(title, [])
        doc_id = f"{title}#{len(same_title)}"
        same_title.append(doc_id)
        self.by_key[title, text] = doc_id
        self.documents.append(Document(doc_id=doc_id, title=title, text=text))

    def by_passage(self, rec: FieldReader, field: str | None, title: str, text: str) -> str:
        doc_id = self.by_key.get((title, text))
        if doc_id is None:
            raise rec.error(field, f"matches no passage of {self.path.name} (title {title!r})")
        return doc_id

    def by_unique_title(self, rec: FieldReader, field: str, title: str) -> str:
        doc_ids = self.by_title.get(title, [])
        if len(doc_ids) != 1:
            found = "no passage" if not doc_ids else f"{len(doc_ids)} passages"
            raise rec.error(field, f"title {title!r} matches {found} of {self.path.name}; need exactly one")
        return doc_ids[0]


def _hipporag_files(root: Path, stem: str) -> tuple[_PassageIndex, list[FieldReader]]:
    """HippoRAG names a split's files <stem>.json (questions) and <stem>_corpus.json (passages)."""
    return _PassageIndex(root / f"{stem}_corpus.json"), json_array(root / f"{stem}.json")


def _musique_hops(rec: FieldReader, question_id: str) -> tuple[int, str]:
    match = re.match(r"(\d)hop(\d*)__", question_id)
    if not match:
        raise rec.error("id", f"expected a MuSiQue id starting with '<n>hop…__', got {question_id!r}")
    return int(match[1]), question_id.split("__", 1)[0]


def _musique_question(rec: FieldReader, passages: _PassageIndex) -> Question:
    question_id = rec.text("id")
    hops, composition = _musique_hops(rec, question_id)
    doc_by_idx: dict[int, str] = {}
    gold: list[str] = []
    titles: list[str] = []
    for paragraph in rec.items("paragraphs"):
        title, text = paragraph.get("title"), paragraph.get("paragraph_text")
        doc_id = passages.by_passage(paragraph, "paragraph_text", title, text)
        doc_by_idx[paragraph.get("idx", int)] = doc_id
        if paragraph.get("is_supporting", bool):
            gold.append(doc_id)
            titles.append(title)
    return Question(
        question_id=question_id,
        question=rec.text("question"),
        answers=_answers(rec.text("answer"), rec.strings("answer_aliases")),
        question_type=f"{hops}hop",
        gold_doc_ids=dedupe(gold),
        gold_entities=dedupe(titles),  # a Wikipedia passage's title names the entity it is about
        metadata={
            "composition": composition,
            "n_hops": hops,
            "decomposition": [_musique_hop(h, doc_by_idx) for h in rec.items("question_decomposition")],
        },
    )


def _musique_hop(hop: FieldReader, doc_by_idx: dict[int, str]) -> dict[str, Any]:
    # Each single-hop sub-question names the paragraph that answers it: kept for per-hop recall.
    idx = hop.get("paragraph_support_idx", (int, type(None)))
    if idx is not None and idx not in doc_by_idx:
        raise hop.error("paragraph_support_idx", f"no paragraph with idx {idx}")
    return {
        "question": hop.text("question"),
        "answer": hop.get("answer"),
        "doc_id": None if idx is None else doc_by_idx[idx],
    }


@register_loader("musique")
def _musique(root: Path, *, stem: str = "musique_train") -> DocsAndQuestions:
    """MuSiQue, HippoRAG layout: <stem>.json questions + <stem>_corpus.json passages.

    Gold = the paragraphs with is_supporting, matched to corpus passages by (title, text); gold
    entities = their distinct titles.
    question_type = hop count ("2hop", "3hop", "4hop") from the id prefix; the full composition
    ("3hop1") and the decomposition (sub-question, answer, doc_id per hop) are in metadata.
    answers = answer, then answer_aliases.
    """
    passages, records = _hipporag_files(root, stem)
    pairs = [(r, _musique_question(r, passages)) for r in records]
    return passages.documents, unique_questions(pairs, "id")


_HOTPOT_TYPES = ("bridge", "comparison")


def _hotpot_context(rec: FieldReader) -> dict[str, str]:
    """Context = [[title, [sentence, …]], …] → {title: passage text} (sentences keep their spaces)."""
    context: dict[str, str] = {}
    for item in rec.items("context"):
        pair = item.value
        if not (
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_strings(pair[1])
        ):
            raise item.error(None, "expected [title, [sentence, ...]]")
        context[pair[0]] = "".join(pair[1])
    return context


def _hotpot_support(rec: FieldReader) -> list[tuple[FieldReader, str, int]]:
    facts = []
    for item in rec.items("supporting_facts"):
        fact = item.value
        if not (
            isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str) and is_kind(fact[1], int)
        ):
            raise item.error(None, "expected [title, sentence index]")
        facts.append((item, fact[0], fact[1]))
    return facts


def _hotpot_question(rec: FieldReader, passages: _PassageIndex) -> Question:
    context = _hotpot_context(rec)
    facts = _hotpot_support(rec)
    gold = []
    for item, title, _ in facts:
        if title not in context:
            raise item.error(None, f"supporting title {title!r} is not among the question's context")
        gold.append(passages.by_passage(item, None, title, context[title]))
    question_type = rec.one_of("type", _HOTPOT_TYPES, "type")
    return Question(
        question_id=rec.text("_id"),
        question=rec.text("question"),
        answers=[rec.text("answer")],
        question_type=question_type,
        gold_doc_ids=dedupe(gold),
        gold_entities=dedupe(title for _, title, _ in facts),
        metadata={"level": rec.get("level"), "supporting_facts": [[t, i] for _, t, i in facts]},
    )


@register_loader("hotpotqa")
def _hotpotqa(root: Path, *, stem: str = "hotpotqa_train") -> DocsAndQuestions:
    """HotpotQA, HippoRAG layout: <stem>.json questions + <stem>_corpus.json ({title: sentences}).

    One passage = the sentences of one title joined with "" (they carry their leading spaces).
    Gold = the distinct titles of supporting_facts, matched to the corpus through the question's own
    context paragraph (title and text); gold entities = those titles. question_type = bridge /
    comparison; level and the sentence-level supporting facts are in metadata. No aliases exist:
    answers = [answer].
    """
    passages, records = _hipporag_files(root, stem)
    pairs = [(r, _hotpot_question(r, passages)) for r in records]
    return passages.documents, unique_questions(pairs, "_id")


# ---------------------------------------------------------------- 2WikiMultihopQA

_TWOWIKI_CORPUS = "2wikimultihopqa_corpus.json"
_TWOWIKI_QUESTIONS = "fastgraphrag_vdb_results_101_with_gold_titles.json"
_TWOWIKI_MULTIHOP = "fastgraphrag_questions_101.json"


def _string_array(path: Path) -> list[str]:
    records = json_array(path)
    for rec in records:
        if not isinstance(rec.value, str):
            raise rec.error(None, f"expected a string, got {type_name(rec.value)}")
    return [rec.value for rec in records]


def _two_wiki_question(rec: FieldReader, passages: _PassageIndex, multihop: set[str]) -> Question:
    question = rec.text("question")
    titles = rec.strings("ground_truth")
    gold = [passages.by_unique_title(rec, f"ground_truth[{i}]", t) for i, t in enumerate(titles)]
    answer = rec.get("answer").strip()
    return Question(
        question_id=f"2wiki-{rec.record:03d}",
        question=question,
        answers=[answer] if answer else [],
        gold_doc_ids=dedupe(gold),
        gold_entities=dedupe(titles),
        gold_edges=_two_wiki_evidences(rec) if "evidences" in rec.value else [],
        metadata={
            "retrieval_only": not answer,
            "fastgraphrag_multihop": question in multihop,
            # fast-graphrag's VectorDB retrieval: a system output, kept to compare with its numbers.
            "vdb_baseline_titles": rec.strings("evidence"),
        },
    )


def _two_wiki_evidences(rec: FieldReader) -> list[GoldEdge]:
    """2Wiki's evidence triples [subject, relation, object] (its own question files) as gold edges."""
    edges = []
    for item in rec.items("evidences"):
        triple = item.value
        if not (isinstance(triple, list) and len(triple) == 3 and _is_strings(triple) and all(triple)):
            raise item.error(
                None, "expected an evidence triple [subject, relation, object] of non-empty strings"
            )
        edges.append(GoldEdge(source=triple[0], relation=triple[1], target=triple[2]))
    return edges


@register_loader("2wikimultihopqa")
def _two_wiki(root: Path) -> DocsAndQuestions:
    """2WikiMultihopQA: HippoRAG's 6,119-passage corpus + fast-graphrag's 101 questions (gold titles).

    There are no answer strings: answers = [] and metadata retrieval_only=True on every question
    (retrieval recall only). Gold titles resolve to the one passage with that title and are the
    gold entities; a record with 2Wiki's `evidences` triples gets them as gold edges (the shared
    fast-graphrag file has none: its `evidence` is a system's retrieved titles). question_id =
    "2wiki-<index>" (question texts are unique; a repeated one raises DataError); metadata
    fastgraphrag_multihop marks the 76 questions fast-graphrag counts as genuinely multi-hop.
    """
    passages = _PassageIndex(root / _TWOWIKI_CORPUS)
    multihop = set(_string_array(root / _TWOWIKI_MULTIHOP))
    pairs = [(r, _two_wiki_question(r, passages, multihop)) for r in json_array(root / _TWOWIKI_QUESTIONS)]
    # The ids are positions and can never repeat: the question text is the natural key.
    check_unique(((q.question, r) for r, q in pairs), "question", "question")
    return passages.documents, [q for _, q in pairs]
