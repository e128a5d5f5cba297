"""Typed loaders for the real evaluation data sets → `records.Dataset`.

One registry, `LOADERS[name](path, **options)`, or `load_dataset(name, path, **options)`. `path` is the
data set's folder (e.g. `/work/shared/datasets/multihop_rag`). Every loader accepts the sampling options

- `limit_questions=N`: keep a seeded random sample of N questions (original order kept);
- `limit_documents=N`: keep every gold document of the kept questions, then fill up to N with a seeded
  random sample of the other documents (original order kept). Gold documents are never dropped, so the
  result holds more than N documents when the kept questions need more;
- `seed=0`: seed of both samples (each sample has its own stream, so limiting documents does not change
  which questions are kept).

Malformed input never yields partial data: bad JSON, a missing or mistyped field, a gold reference that
matches no document, or a duplicate id raises `DataError(path, record, field, problem)`, where `record` is
the index in a JSON array, the key in a JSON object, or `"line N"` in JSON Lines / CSV files, and
`field` is a path into the record such as `evidence_list[2].title`.

Document ids: natural keys where the data has them (MuSiQue/HotpotQA/2Wiki passages: `"<title>#<k>"`,
the k-th passage with that title in corpus order; stories: `gutenberg-<ebook id>`; ODSum meetings: the
file stem; GraphRAG-Bench: `corpus_name`; folders of text files: the relative path), otherwise derived
from a stable field (MultiHop-RAG: hash of the article url) or the position (QMSum: `qmsum-test-<line>`).
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import random
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ragtrial.records import DataError, Dataset, Document, Question

DocsAndQuestions = tuple[list[Document], list[Question]]

LOADERS: dict[str, Callable[..., Dataset]] = {}

PUBLISHED_AT: dict[str, str] = {
    "multihop_rag": "Tang & Yang, 'MultiHop-RAG: Benchmarking Retrieval-Augmented Generation for Multi-Hop "
    "Queries' (COLM 2024, arXiv:2401.15391); GitHub yixuantt/MultiHop-RAG, Hugging Face dataset "
    "yixuantt/MultiHopRAG; licence ODC-BY (articles are third-party news content).",
    "musique": "Trivedi et al., 'MuSiQue: Multihop Questions via Single-hop Question Composition' "
    "(TACL 2022); GitHub StonyBrookNLP/musique, data CC BY 4.0. The 100-question train sample and its "
    "corpus come from GitHub OSU-NLP-Group/HippoRAG (legacy branch, MIT; Gutierrez et al., HippoRAG, "
    "NeurIPS 2024).",
    "hotpotqa": "Yang et al., 'HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering' "
    "(EMNLP 2018); hotpotqa.github.io, GitHub hotpotqa/hotpot, data CC BY-SA 4.0. The 100-question train "
    "sample and its corpus come from GitHub OSU-NLP-Group/HippoRAG (legacy branch, MIT).",
    "2wikimultihopqa": "Ho et al., 'Constructing A Multi-hop QA Dataset for Comprehensive Evaluation of "
    "Reasoning Steps' (COLING 2020); GitHub Alab-NII/2wikimultihop, Apache 2.0. Corpus from GitHub "
    "OSU-NLP-Group/HippoRAG (MIT); the 101 questions with gold titles from GitHub "
    "circlemind-ai/fast-graphrag benchmarks (MIT).",
    "qmsum": "Zhong et al., 'QMSum: A New Benchmark for Query-based Multi-domain Meeting Summarization' "
    "(NAACL 2021); GitHub Yale-LILY/QMSum, MIT (AMI/ICSI transcripts CC BY 4.0).",
    "squality": "Wang et al., 'SQuALITY: Building a Long-Document Summarization Dataset the Hard Way' "
    "(EMNLP 2022); GitHub nyu-mll/SQuALITY (v1.3); stories Project Gutenberg licence, summaries CC BY 4.0.",
    "odsum": "Zhou et al., 'ODSum: New Benchmarks for Open Domain Multi-Document Summarization' "
    "(arXiv:2309.08960, 2023); GitHub yale-nlp/ODSum, MIT (plus the QMSum and SQuALITY terms).",
    "graphrag_bench": "Xiang et al., 'When to use Graphs in RAG: A Comprehensive Analysis for Graph "
    "Retrieval-Augmented Generation' (arXiv:2506.05690, 2025); GitHub GraphRAG-Bench/GraphRAG-Benchmark, "
    "leaderboard graphrag-bench.github.io; no licence stated.",
    "graphrag_podcast": "Edge et al., 'From Local to Global: A Graph RAG Approach to Query-Focused "
    "Summarization' (arXiv:2404.16130, 2024) for the podcast transcripts and global questions; the MSFT "
    "earnings subset accompanies arXiv:2503.02922; GitHub microsoft/graphrag-benchmarking-datasets, "
    "CDLA-Permissive-2.0.",
    "text_folder": "Any local folder of .txt/.md files. The kit's example, A Christmas Carol (Project "
    "Gutenberg eBook #24022), is public domain in the US under the Project Gutenberg licence.",
}

# Documentation files that sit next to the data in the shared copies; never corpus text.
DEFAULT_EXCLUDE = ("SOURCE.md", "README.md", "UPSTREAM_README.md", "NOTICE.md", "LICENSE*")

NOVEL_CORPUS_MISSING = (
    "the GraphRAG-Bench Novel corpus is not in this copy (upstream Datas/Corpus/novel.json was not "
    "obtainable); it is published in GitHub repo GraphRAG-Bench/GraphRAG-Benchmark at "
    "Datas/Corpus/novel.json (see graphrag-bench.github.io). Save it here as novel_corpus.json to load "
    "the novel questions"
)


# ---------------------------------------------------------------- registry and sampling


def load_dataset(name: str, path: str | Path, **options: Any) -> Dataset:
    """Load data set `name` from folder `path`; options as documented on the loader."""
    if name not in LOADERS:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(sorted(LOADERS))}")
    return LOADERS[name](path, **options)


def _loader(name: str) -> Callable[[Callable[..., DocsAndQuestions]], Callable[..., Dataset]]:
    """Register a raw loader `(folder, **options) -> (documents, questions)` under `name`.

    The wrapper adds what every loader shares (the sampling options and the final consistency
    check), so no loader re-implements it.
    """

    def register(raw: Callable[..., DocsAndQuestions]) -> Callable[..., Dataset]:
        def load(
            path: str | Path,
            *,
            limit_questions: int | None = None,
            limit_documents: int | None = None,
            seed: int = 0,
            **options: Any,
        ) -> Dataset:
            _check_limits(limit_questions=limit_questions, limit_documents=limit_documents)
            root = Path(path)
            if not root.is_dir():
                raise DataError(str(root), None, None, "data set folder not found")
            documents, questions = raw(root, **options)
            _check_consistent(root, documents, questions)
            questions = _sample(questions, limit_questions, random.Random(f"{seed}:questions"))
            documents = _limit_documents(documents, questions, limit_documents, seed)
            return Dataset(name=name, documents=documents, questions=questions, source_path=str(root))

        load.__name__ = load.__qualname__ = f"load_{name}"
        load.__doc__ = raw.__doc__
        load.__signature__ = _combined_signature(load, raw)  # type: ignore[attr-defined]
        LOADERS[name] = load
        return load

    return register


def _combined_signature(
    load: Callable[..., Dataset], raw: Callable[..., DocsAndQuestions]
) -> inspect.Signature:
    """The wrapper's shared options plus the raw loader's own ones, so help() shows every option."""
    shared = [p for p in inspect.signature(load).parameters.values() if p.kind != p.VAR_KEYWORD]
    own = list(inspect.signature(raw).parameters.values())[1:]  # drop the raw loader's folder argument
    return inspect.signature(load).replace(parameters=[*shared, *own])


def _check_limits(**limits: int | None) -> None:
    for option, value in limits.items():
        if value is not None and (not _is_kind(value, int) or value < 0):
            raise ValueError(f"{option} must be a non-negative integer or None, got {value!r}")


def _sample(items: list[Any], limit: int | None, rng: random.Random) -> list[Any]:
    """A seeded random subset of `limit` items, in their original order."""
    if limit is None or limit >= len(items):
        return items
    keep = set(rng.sample(range(len(items)), limit))
    return [item for i, item in enumerate(items) if i in keep]


def _limit_documents(
    documents: list[Document], questions: list[Question], limit: int | None, seed: int
) -> list[Document]:
    if limit is None:
        return documents
    gold = {doc_id for q in questions for doc_id in q.gold_doc_ids}
    others = [d for d in documents if d.doc_id not in gold]
    extra = {d.doc_id for d in _sample(others, max(0, limit - len(gold)), random.Random(f"{seed}:documents"))}
    return [d for d in documents if d.doc_id in gold or d.doc_id in extra]


def _check_consistent(root: Path, documents: list[Document], questions: list[Question]) -> None:
    """Last line of defence: loaders check ids where they know the record; this catches the rest."""
    _check_unique(((d.doc_id, _Rec(root, i, d)) for i, d in enumerate(documents)), "doc_id", "document id")
    _check_unique(
        ((q.question_id, _Rec(root, i, q)) for i, q in enumerate(questions)), "question_id", "question id"
    )
    doc_ids = {d.doc_id for d in documents}
    for q in questions:
        missing = [g for g in q.gold_doc_ids if g not in doc_ids]
        if missing:
            raise DataError(str(root), q.question_id, "gold_doc_ids", f"no document with id {missing[0]!r}")


def _check_unique(keyed: Iterable[tuple[str, _Rec]], field: str, what: str) -> None:
    """Raise on the second record whose key repeats, naming that record and the first one."""
    first: dict[str, _Rec] = {}
    for key, rec in keyed:
        if key in first:
            raise rec.error(field, f"duplicate {what} {key!r} (first seen at record {first[key].record})")
        first[key] = rec


def _unique_questions(pairs: list[tuple[_Rec, Question]], field: str) -> list[Question]:
    """Questions built from records of one file, after checking that their ids are unique there."""
    _check_unique(((q.question_id, r) for r, q in pairs), field, "question id")
    return [q for _, q in pairs]


# ---------------------------------------------------------------- reading files and fields


@dataclass(frozen=True)
class _Rec:
    """One input value and where it sits, so that every error names file, record and field."""

    path: Path
    record: str | int | None
    value: Any
    prefix: str = ""  # field path of `value` inside the record, e.g. "evidence_list[2]."

    def error(self, field: str | None, problem: str) -> DataError:
        where = self.prefix + field if field is not None else self.prefix.rstrip(".") or None
        return DataError(str(self.path), self.record, where, problem)

    def get(self, key: str, kind: type | tuple[type, ...] = str) -> Any:
        if not isinstance(self.value, dict):
            raise self.error(None, f"expected an object, got {_type_name(self.value)}")
        if key not in self.value:
            raise self.error(key, "missing")
        value = self.value[key]
        if not _is_kind(value, kind):
            raise self.error(key, f"expected {_kind_name(kind)}, got {_type_name(value)}")
        return value

    def text(self, key: str) -> str:
        """A required string that must not be blank (question text, document text, answers)."""
        value = self.get(key, str)
        if not value.strip():
            raise self.error(key, "empty")
        return value

    def strings(self, key: str) -> list[str]:
        values = self.get(key, list)
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {_type_name(value)}")
        return values

    def items(self, key: str) -> list[_Rec]:
        """The elements of list field `key`, each as a record located at `key[i]`."""
        return [self.at(f"{key}[{i}]", v) for i, v in enumerate(self.get(key, list))]

    def at(self, field: str, value: Any) -> _Rec:
        return _Rec(self.path, self.record, value, f"{self.prefix}{field}.")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is a subclass of int in Python, but `true` is not a valid paragraph index.
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _require_file(path: Path, hint: str = "") -> Path:
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" + (f"; {hint}" if hint else ""))
    return path


def _read_text(path: Path) -> str:
    # utf-8-sig drops a BOM (Gutenberg text, Microsoft CSVs); universal newlines turn CRLF into LF.
    try:
        return _require_file(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(str(path), None, None, f"not UTF-8 text ({err.reason} at byte {err.start})") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(
            str(path), None, None, f"invalid JSON: {err.msg} (line {err.lineno}, column {err.colno})"
        ) from None


def _json_array(path: Path) -> list[_Rec]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(str(path), None, None, f"expected a JSON array at top level, got {_type_name(data)}")
    return [_Rec(path, i, value) for i, value in enumerate(data)]


def _json_object(path: Path) -> list[_Rec]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(str(path), None, None, f"expected a JSON object at top level, got {_type_name(data)}")
    return [_Rec(path, key, value) for key, value in data.items()]


def _json_lines(path: Path) -> list[_Rec]:
    records = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue  # a trailing or separating blank line holds no record
        try:
            records.append(_Rec(path, f"line {number}", json.loads(line)))
        except json.JSONDecodeError as err:
            raise DataError(
                str(path), f"line {number}", None, f"invalid JSON: {err.msg} (column {err.colno})"
            ) from None
    return records


def _csv_rows(path: Path, columns: Sequence[str]) -> list[_Rec]:
    reader = csv.DictReader(_read_text(path).splitlines())
    for column in columns:
        if column not in (reader.fieldnames or []):
            raise DataError(str(path), None, column, f"missing CSV column (header: {reader.fieldnames})")
    return [_Rec(path, f"line {reader.line_num}", row) for row in reader]


def _stable_hash(text: str, length: int = 12) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def _answers(answer: str, aliases: Iterable[str] = ()) -> list[str]:
    """Gold answer first, then the aliases that differ from it (order kept, no repeats)."""
    return list(dict.fromkeys([answer, *aliases]))


def _dedupe(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _choose(option: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{option} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


# ---------------------------------------------------------------- folders of text files


def _natural_key(path: Path) -> list[Any]:
    # "part2" before "part10": chunked transcripts keep their reading order.
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.as_posix())]


def _text_documents(
    root: Path, patterns: Sequence[str], exclude: Sequence[str], *, keep_empty: bool = False
) -> list[Document]:
    """One Document per matching file; an empty file raises unless `keep_empty` (then it warns)."""
    if not root.is_dir():
        raise DataError(str(root), None, None, "folder not found")
    files = [
        p
        for p in root.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and any(fnmatch(p.name, pat) for pat in patterns)
        and not any(fnmatch(p.name, pat) for pat in exclude)
    ]
    if not files:
        raise DataError(str(root), None, None, f"no files matching {list(patterns)}")
    documents = []
    for file in sorted(files, key=lambda p: _natural_key(p.relative_to(root))):
        text = _read_text(file)
        doc = Document(doc_id=file.relative_to(root).as_posix(), title=file.stem, text=text)
        if not text.strip():
            if not keep_empty:
                raise DataError(str(file), None, "text", "empty file")
            warnings.warn(f"{file}: empty file, kept as an empty document", stacklevel=2)
            doc.metadata["empty"] = True
        documents.append(doc)
    return documents


@_loader("text_folder")
def _text_folder(
    root: Path, *, patterns: Sequence[str] = ("*.txt", "*.md"), exclude: Sequence[str] = DEFAULT_EXCLUDE
) -> DocsAndQuestions:
    """Any folder of text files, searched recursively (hidden files skipped); no questions.

    doc_id = path relative to the folder, title = file stem. `patterns` selects files by name,
    `exclude` drops documentation files (SOURCE.md, README.md, LICENSE*, … by default).
    """
    return _text_documents(root, patterns, exclude), []


# ---------------------------------------------------------------- MultiHop-RAG

_MULTIHOP_TYPES = {
    "inference_query": "inference",
    "comparison_query": "comparison",
    "temporal_query": "temporal",
    "null_query": "null",
}
_NULL_ANSWER = "Insufficient information."


def _iso_timestamp(rec: _Rec, key: str) -> str:
    # The HF re-export renders timestamps as "2023-11-27 08:45:59.000000000Z" (UTC, nanoseconds).
    value = rec.text(key)
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|\+00:00)", value)
    if not match:
        raise rec.error(key, f"not a UTC timestamp: {value!r}")
    return f"{match[1]}T{match[2]}+00:00"


def _multihop_document(rec: _Rec) -> Document:
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

    def __init__(self, records: list[_Rec], documents: list[Document]):
        self.by_url = {d.metadata["url"]: d.doc_id for d in documents}
        self.by_title = {d.title: d.doc_id for d in documents}
        _check_unique(
            ((d.title, r) for r, d in zip(records, documents, strict=True)), "title", "article title"
        )

    def resolve(self, evidence: _Rec) -> str:
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


def _multihop_question(rec: _Rec, articles: _ArticleIndex) -> Question:
    raw_type = rec.text("question_type")
    if raw_type not in _MULTIHOP_TYPES:
        raise rec.error(
            "question_type", f"unknown type {raw_type!r}; expected one of {list(_MULTIHOP_TYPES)}"
        )
    evidence = [(ev, articles.resolve(ev)) for ev in rec.items("evidence_list")]
    answer = rec.text("answer")
    return Question(
        question_id=f"mhr-q{rec.record:04d}",
        question=rec.text("query"),
        answers=[answer],
        question_type=_MULTIHOP_TYPES[raw_type],
        # Several facts often come from one article: gold is the set of articles, in evidence order.
        gold_doc_ids=_dedupe(doc_id for _, doc_id in evidence),
        metadata={
            "is_null": answer == _NULL_ANSWER,
            "evidence": [{"doc_id": doc_id, "fact": ev.get("fact")} for ev, doc_id in evidence],
        },
    )


@_loader("multihop_rag")
def _multihop_rag(root: Path) -> DocsAndQuestions:
    """MultiHop-RAG: corpus.json (609 news articles) + MultiHopRAG.json (2,556 queries).

    doc_id = "mhr-" + sha1(url)[:12] (the corpus has no ids; the url is the article's natural key and
    survives re-exports that reorder the array). question_id = "mhr-q<index>". question_type drops the
    "_query" suffix. Evidence items resolve to articles by url and title (they must agree); the gold
    documents are the distinct evidence articles. date = ISO date of published_at (full UTC timestamp in
    metadata). Null queries (answer "Insufficient information.") get metadata is_null=True.
    """
    records = _json_array(root / "corpus.json")
    documents = [_multihop_document(r) for r in records]
    _check_unique(((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "url", "article url")
    articles = _ArticleIndex(records, documents)
    questions = [_multihop_question(r, articles) for r in _json_array(root / "MultiHopRAG.json")]
    return documents, questions


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
    def _passages(path: Path) -> list[tuple[_Rec, str, str]]:
        # HippoRAG ships two shapes: [{"title", "text"}] and {title: [sentence, …]}.
        data = _read_json(path)
        if isinstance(data, list):
            recs = [_Rec(path, i, v) for i, v in enumerate(data)]
            return [(r, r.get("title"), r.text("text")) for r in recs]
        if isinstance(data, dict):
            recs = [_Rec(path, title, v) for title, v in data.items()]
            for r in recs:
                if not _is_strings(r.value):
                    raise r.error(None, f"expected a list of sentences, got {_type_name(r.value)}")
            return [(r, str(r.record), "".join(r.value)) for r in recs]
        raise DataError(str(path), None, None, f"expected a JSON array or object, got {_type_name(data)}")

    def _add(self, rec: _Rec, title: str, text: str) -> None:
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

    def by_passage(self, rec: _Rec, field: str | None, title: str, text: str) -> str:
        doc_id = self.by_key.get((title, text))
        if doc_id is None:
            raise rec.error(field, f"matches no passage of {self.path.name} (title {title!r})")
        return doc_id

    def by_unique_title(self, rec: _Rec, field: str, title: str) -> str:
        doc_ids = self.by_title.get(title, [])
        if len(doc_ids) != 1:
            found = "no passage" if not doc_ids else f"{len(doc_ids)} passages"
            raise rec.error(field, f"title {title!r} matches {found} of {self.path.name}; need exactly one")
        return doc_ids[0]


def _hipporag_files(root: Path, stem: str) -> tuple[_PassageIndex, list[_Rec]]:
    """HippoRAG names a split's files <stem>.json (questions) and <stem>_corpus.json (passages)."""
    return _PassageIndex(root / f"{stem}_corpus.json"), _json_array(root / f"{stem}.json")


def _musique_hops(rec: _Rec, question_id: str) -> tuple[int, str]:
    match = re.match(r"(\d)hop(\d*)__", question_id)
    if not match:
        raise rec.error("id", f"expected a MuSiQue id starting with '<n>hop…__', got {question_id!r}")
    return int(match[1]), question_id.split("__", 1)[0]


def _musique_question(rec: _Rec, passages: _PassageIndex) -> Question:
    question_id = rec.text("id")
    hops, composition = _musique_hops(rec, question_id)
    doc_by_idx: dict[int, str] = {}
    gold: list[str] = []
    for paragraph in rec.items("paragraphs"):
        title, text = paragraph.get("title"), paragraph.get("paragraph_text")
        doc_id = passages.by_passage(paragraph, "paragraph_text", title, text)
        doc_by_idx[paragraph.get("idx", int)] = doc_id
        if paragraph.get("is_supporting", bool):
            gold.append(doc_id)
    return Question(
        question_id=question_id,
        question=rec.text("question"),
        answers=_answers(rec.text("answer"), rec.strings("answer_aliases")),
        question_type=f"{hops}hop",
        gold_doc_ids=_dedupe(gold),
        metadata={
            "composition": composition,
            "n_hops": hops,
            "decomposition": [_musique_hop(h, doc_by_idx) for h in rec.items("question_decomposition")],
        },
    )


def _musique_hop(hop: _Rec, doc_by_idx: dict[int, str]) -> dict[str, Any]:
    # Each single-hop sub-question names the paragraph that answers it: kept for per-hop recall.
    idx = hop.get("paragraph_support_idx", (int, type(None)))
    if idx is not None and idx not in doc_by_idx:
        raise hop.error("paragraph_support_idx", f"no paragraph with idx {idx}")
    return {
        "question": hop.text("question"),
        "answer": hop.get("answer"),
        "doc_id": None if idx is None else doc_by_idx[idx],
    }


@_loader("musique")
def _musique(root: Path, *, stem: str = "musique_train") -> DocsAndQuestions:
    """MuSiQue, HippoRAG layout: <stem>.json questions + <stem>_corpus.json passages.

    Gold = the paragraphs with is_supporting, matched to corpus passages by (title, text).
    question_type = hop count ("2hop", "3hop", "4hop") from the id prefix; the full composition
    ("3hop1") and the decomposition (sub-question, answer, doc_id per hop) are in metadata.
    answers = answer, then answer_aliases.
    """
    passages, records = _hipporag_files(root, stem)
    pairs = [(r, _musique_question(r, passages)) for r in records]
    return passages.documents, _unique_questions(pairs, "id")


_HOTPOT_TYPES = ("bridge", "comparison")


def _hotpot_context(rec: _Rec) -> dict[str, str]:
    """context = [[title, [sentence, …]], …] → {title: passage text} (sentences keep their spaces)."""
    context: dict[str, str] = {}
    for item in rec.items("context"):
        pair = item.value
        if not (
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_strings(pair[1])
        ):
            raise item.error(None, "expected [title, [sentence, ...]]")
        context[pair[0]] = "".join(pair[1])
    return context


def _hotpot_support(rec: _Rec) -> list[tuple[_Rec, str, int]]:
    facts = []
    for item in rec.items("supporting_facts"):
        fact = item.value
        if not (
            isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str) and _is_kind(fact[1], int)
        ):
            raise item.error(None, "expected [title, sentence index]")
        facts.append((item, fact[0], fact[1]))
    return facts


def _hotpot_question(rec: _Rec, passages: _PassageIndex) -> Question:
    context = _hotpot_context(rec)
    facts = _hotpot_support(rec)
    gold = []
    for item, title, _ in facts:
        if title not in context:
            raise item.error(None, f"supporting title {title!r} is not among the question's context")
        gold.append(passages.by_passage(item, None, title, context[title]))
    question_type = rec.text("type")
    if question_type not in _HOTPOT_TYPES:
        raise rec.error("type", f"unknown type {question_type!r}; expected one of {list(_HOTPOT_TYPES)}")
    return Question(
        question_id=rec.text("_id"),
        question=rec.text("question"),
        answers=[rec.text("answer")],
        question_type=question_type,
        gold_doc_ids=_dedupe(gold),
        metadata={"level": rec.get("level"), "supporting_facts": [[t, i] for _, t, i in facts]},
    )


@_loader("hotpotqa")
def _hotpotqa(root: Path, *, stem: str = "hotpotqa_train") -> DocsAndQuestions:
    """HotpotQA, HippoRAG layout: <stem>.json questions + <stem>_corpus.json ({title: sentences}).

    One passage = the sentences of one title joined with "" (they carry their leading spaces).
    Gold = the distinct titles of supporting_facts, matched to the corpus through the question's own
    context paragraph (title and text). question_type = bridge / comparison; level and the
    sentence-level supporting facts are in metadata. No aliases exist: answers = [answer].
    """
    passages, records = _hipporag_files(root, stem)
    pairs = [(r, _hotpot_question(r, passages)) for r in records]
    return passages.documents, _unique_questions(pairs, "_id")


# ---------------------------------------------------------------- 2WikiMultihopQA

_TWOWIKI_CORPUS = "2wikimultihopqa_corpus.json"
_TWOWIKI_QUESTIONS = "fastgraphrag_vdb_results_101_with_gold_titles.json"
_TWOWIKI_MULTIHOP = "fastgraphrag_questions_101.json"


def _string_array(path: Path) -> list[str]:
    records = _json_array(path)
    for rec in records:
        if not isinstance(rec.value, str):
            raise rec.error(None, f"expected a string, got {_type_name(rec.value)}")
    return [rec.value for rec in records]


def _two_wiki_question(rec: _Rec, passages: _PassageIndex, multihop: set[str]) -> Question:
    question = rec.text("question")
    titles = rec.strings("ground_truth")
    gold = [passages.by_unique_title(rec, f"ground_truth[{i}]", t) for i, t in enumerate(titles)]
    answer = rec.get("answer").strip()
    return Question(
        question_id=f"2wiki-{rec.record:03d}",
        question=question,
        answers=[answer] if answer else [],
        gold_doc_ids=_dedupe(gold),
        metadata={
            "retrieval_only": not answer,
            "fastgraphrag_multihop": question in multihop,
            # fast-graphrag's VectorDB retrieval: a system output, kept to compare with its numbers.
            "vdb_baseline_titles": rec.strings("evidence"),
        },
    )


@_loader("2wikimultihopqa")
def _two_wiki(root: Path) -> DocsAndQuestions:
    """2WikiMultihopQA: HippoRAG's 6,119-passage corpus + fast-graphrag's 101 questions (gold titles).

    There are no answer strings: answers = [] and metadata retrieval_only=True on every question
    (retrieval recall only). Gold titles resolve to the one passage with that title. question_id =
    "2wiki-<index>"; metadata fastgraphrag_multihop marks the 76 questions fast-graphrag counts as
    genuinely multi-hop.
    """
    passages = _PassageIndex(root / _TWOWIKI_CORPUS)
    multihop = set(_string_array(root / _TWOWIKI_MULTIHOP))
    pairs = [(r, _two_wiki_question(r, passages, multihop)) for r in _json_array(root / _TWOWIKI_QUESTIONS)]
    return passages.documents, _unique_questions(pairs, "question")


# ---------------------------------------------------------------- QMSum


def _turn_spans(rec: _Rec, key: str, n_turns: int) -> list[list[int]]:
    """[["1", "16"], …] (turn indices as strings) → [[1, 16], …], checked against the transcript."""
    spans = []
    for item in rec.items(key):
        span = item.value
        if not (isinstance(span, list) and len(span) == 2 and all(str(v).isdigit() for v in span)):
            raise item.error(None, f"expected [start, end] turn indices, got {span!r}")
        start, end = int(span[0]), int(span[1])
        if not start <= end < n_turns:
            raise item.error(None, f"span {span!r} outside the {n_turns} transcript turns")
        spans.append([start, end])
    return spans


def _qmsum_meeting(rec: _Rec, doc_id: str) -> Document:
    turns = rec.items("meeting_transcripts")
    # One turn per line, so relevant_text_span turn indices are also line indices of the text.
    lines = [f"{t.get('speaker')}: {t.get('content')}" for t in turns]
    topics = [
        {"topic": t.text("topic"), "relevant_text_span": _turn_spans(t, "relevant_text_span", len(turns))}
        for t in rec.items("topic_list")
    ]
    return Document(
        doc_id=doc_id, title=doc_id, text="\n".join(lines), metadata={"n_turns": len(turns), "topics": topics}
    )


def _qmsum_questions(rec: _Rec, doc: Document) -> list[tuple[_Rec, Question]]:
    pairs = []
    for kind in ("general", "specific"):
        for j, item in enumerate(rec.items(f"{kind}_query_list")):
            spans = (
                _turn_spans(item, "relevant_text_span", doc.metadata["n_turns"]) if kind == "specific" else []
            )
            question = Question(
                question_id=f"{doc.doc_id}-{kind}-{j}",
                question=item.text("query"),
                question_type=kind,
                gold_doc_ids=[doc.doc_id],
                reference_summaries=[item.text("answer")],
                metadata={"relevant_text_span": spans} if spans else {},
            )
            pairs.append((item, question))
    return pairs


@_loader("qmsum")
def _qmsum(root: Path, *, split: str = "test") -> DocsAndQuestions:
    """QMSum query-focused meeting summarization: <split>.jsonl, one meeting per line.

    doc_id = "qmsum-<split>-<n>" (n = 0-based record number; the data has no meeting id); text = one
    "speaker: content" line per turn. Questions: question_type general / specific, the meeting as
    the gold document, the reference answer in reference_summaries (answers stay empty), and for
    specific queries the relevant turn spans (metadata relevant_text_span, inclusive [start, end]).
    """
    documents, pairs = [], []
    for n, rec in enumerate(_json_lines(root / f"{split}.jsonl")):
        doc = _qmsum_meeting(rec, f"qmsum-{split}-{n:03d}")
        documents.append(doc)
        pairs.extend(_qmsum_questions(rec, doc))
    return documents, [q for _, q in pairs]


# ---------------------------------------------------------------- SQuALITY and ODSum


def _story_questions(items: list[_Rec], doc_id: str, id_prefix: str = "") -> list[tuple[_Rec, Question]]:
    """SQuALITY-format questions; question 1 is always the plot question, hence type "general"."""
    pairs = []
    for item in items:
        number = item.get("question_number", int)
        question = Question(
            question_id=f"{id_prefix}{doc_id}-q{number}",
            question=item.text("question_text"),
            question_type="general" if number == 1 else "specific",
            gold_doc_ids=[doc_id],
            reference_summaries=[r.text("response_text") for r in item.items("responses")],
            metadata={"question_number": number},
        )
        pairs.append((item, question))
    return pairs


def _gutenberg_id(rec: _Rec) -> tuple[str, dict[str, Any]]:
    meta = rec.at("metadata", rec.get("metadata", dict))
    passage_id = meta.text("passage_id")
    return f"gutenberg-{passage_id}", {"passage_id": passage_id, "uid": meta.get("uid")}


@_loader("squality")
def _squality(root: Path, *, split: str = "test") -> DocsAndQuestions:
    """SQuALITY v1.3 question-focused summarization: <split>.jsonl, one story per line.

    doc_id = "gutenberg-<Project Gutenberg ebook id>" (metadata.passage_id). Five questions per story,
    question_id "<doc_id>-q<number>", four reference_summaries each; question_type "general" for the
    plot question (number 1), "specific" for the others.
    """
    records = _json_lines(root / f"{split}.jsonl")
    documents, pairs = [], []
    for rec in records:
        doc_id, meta = _gutenberg_id(rec)
        documents.append(Document(doc_id=doc_id, text=rec.text("document"), metadata=meta))
        pairs.extend(_story_questions(rec.items("questions"), doc_id))
    _check_unique(
        ((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "metadata.passage_id", "story id"
    )
    return documents, _unique_questions(pairs, "question_number")


def _odsum_meeting(root: Path) -> DocsAndQuestions:
    folder = root / "meeting" / "documents"
    # The meeting id (file stem) is what meetings_list refers to, so it is the doc_id here.
    # Upstream Bro024.txt is empty yet named by 5 queries: kept (flagged metadata empty=True) so the
    # gold lists stay as published; retrieval can never find it, which the metrics should show.
    texts = _text_documents(folder, ("*.txt",), (), keep_empty=True)
    documents = [d.model_copy(update={"doc_id": d.title}) for d in texts]
    known = {d.doc_id for d in documents}
    questions = []
    for rec in _json_object(root / "meeting" / "queries.json"):
        meetings = rec.strings("meetings_list")
        for i, meeting in enumerate(meetings):
            if meeting not in known:
                raise rec.error(f"meetings_list[{i}]", f"no meeting document {meeting}.txt in {folder}")
        questions.append(
            Question(
                question_id=f"odsum-meeting-{rec.record}",
                question=rec.text("query"),
                gold_doc_ids=_dedupe(meetings),
                reference_summaries=[rec.text("answer")],
                metadata={"n_documents": len(meetings)},
            )
        )
    return documents, questions


def _odsum_story_document(rec: _Rec) -> Document:
    doc_id, meta = _gutenberg_id(rec)
    chunks = rec.strings("divided_document")
    # Chunks end in their own whitespace: joining with "" restores the story, and the offsets
    # let ODSum's chunking be reproduced.
    starts = [sum(len(c) for c in chunks[:i]) for i in range(len(chunks))]
    return Document(
        doc_id=doc_id,
        title=rec.text("title"),
        text="".join(chunks),
        metadata={**meta, "chunk_starts": starts},
    )


def _odsum_story_group(rec: _Rec) -> tuple[str, list[_Rec]]:
    if not isinstance(rec.value, list) or not rec.value:
        raise rec.error(None, f"expected a non-empty array of questions, got {_type_name(rec.value)}")
    items = [rec.at(f"[{i}]", v) for i, v in enumerate(rec.value)]
    titles = {item.text("title") for item in items}
    if len(titles) != 1:
        raise rec.error(
            "title", f"one line must hold the questions of one story, got titles {sorted(titles)}"
        )
    return titles.pop(), items


def _odsum_story(root: Path) -> DocsAndQuestions:
    docs_path = root / "story" / "documents_test.jsonl"
    records = _json_lines(docs_path)
    documents = [_odsum_story_document(r) for r in records]
    _check_unique(((d.title, r) for r, d in zip(records, documents, strict=True)), "title", "story title")
    by_title = {d.title: d.doc_id for d in documents}
    pairs, seen = [], set()
    for rec in _json_lines(root / "story" / "queries.jsonl"):
        title, items = _odsum_story_group(rec)
        # queries.jsonl covers all SQuALITY splits; only the test stories' documents are in the copy.
        if title in by_title:
            seen.add(title)
            pairs.extend(_story_questions(items, by_title[title], "odsum-story-"))
    for rec, doc in zip(records, documents, strict=True):
        if doc.title not in seen:
            raise rec.error("title", "no question group in story/queries.jsonl has this title")
    return documents, _unique_questions(pairs, "question_number")


@_loader("odsum")
def _odsum(root: Path, *, subset: str = "meeting") -> DocsAndQuestions:
    """ODSum open-domain query-focused summarization; subset "meeting" (default) or "story".

    meeting: 232 transcripts (doc_id = meeting id = file stem), 436 queries "odsum-meeting-<key>"
    whose gold documents are their meetings_list; reference_summaries = [answer].
    story: the 52 SQuALITY test stories (doc_id "gutenberg-<ebook id>", title, text = the ODSum chunks
    joined; metadata chunk_starts) and their 5 open-domain questions each (260; 4 references each).
    queries.jsonl also holds the questions of the 75 train/dev stories whose documents are not in this
    copy: those are left out by design; a test story without questions raises DataError.
    """
    subset = _choose("subset", subset, ("meeting", "story"))
    return _odsum_meeting(root) if subset == "meeting" else _odsum_story(root)


# ---------------------------------------------------------------- GraphRAG-Bench

_BENCH_LEVELS = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize", "Creative Generation")


def _bench_question(rec: _Rec, doc_ids: set[str], corpus: Path) -> Question:
    source = rec.text("source")
    if source not in doc_ids:
        raise rec.error("source", f"matches no corpus_name in {corpus.name}")
    level = rec.text("question_type")
    if level not in _BENCH_LEVELS:
        raise rec.error("question_type", f"unknown level {level!r}; expected one of {list(_BENCH_LEVELS)}")
    return Question(
        question_id=rec.text("id"),
        question=rec.text("question"),
        answers=[rec.text("answer")],
        question_type=level,
        gold_doc_ids=[source],
    )


def _disambiguate(pairs: list[tuple[_Rec, Question]]) -> list[tuple[_Rec, Question]]:
    # Upstream novel_questions.json reuses one id for questions on two different books
    # (Novel-55f0c0e2); such ids get "@<source>" appended, any remaining clash still raises.
    counts: dict[str, int] = {}
    for _, q in pairs:
        counts[q.question_id] = counts.get(q.question_id, 0) + 1
    for _, q in pairs:
        if counts[q.question_id] > 1:
            q.metadata["upstream_id"] = q.question_id
            q.question_id = f"{q.question_id}@{q.gold_doc_ids[0]}"
    return pairs


@_loader("graphrag_bench")
def _graphrag_bench(root: Path, *, subset: str = "medical") -> DocsAndQuestions:
    """GraphRAG-Bench: <subset>_corpus.json ([{corpus_name, context}]) + <subset>_questions.json.

    subset "medical" (default): one document (doc_id "Medical", the whole 1.05 M-char corpus — chunk it
    downstream), 2,062 questions whose gold document is their `source`. question_type = level (Fact
    Retrieval / Complex Reasoning / Contextual Summarize / Creative Generation); answers = [reference].
    subset "novel": the corpus is not in the shared copy, so this raises DataError saying where it is
    published; with the file present it loads the same way (one document per book, gold = source).
    """
    subset = _choose("subset", subset, ("medical", "novel"))
    corpus = root / f"{subset}_corpus.json"
    if subset == "novel" and not corpus.is_file():
        raise DataError(str(corpus), None, None, NOVEL_CORPUS_MISSING)
    records = _json_array(corpus)
    documents = [
        Document(doc_id=r.text("corpus_name"), title=r.text("corpus_name"), text=r.text("context"))
        for r in records
    ]
    _check_unique(
        ((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "corpus_name", "corpus name"
    )
    doc_ids = {d.doc_id for d in documents}
    pairs = [(r, _bench_question(r, doc_ids, corpus)) for r in _json_array(root / f"{subset}_questions.json")]
    return documents, _unique_questions(_disambiguate(pairs), "id")


# ---------------------------------------------------------------- GraphRAG paper podcast / MSFT earnings

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def _csv_questions(path: Path, id_prefix: str, question_type: str) -> list[Question]:
    pairs = []
    for rec in _csv_rows(path, ("question_text", "question_id")):
        if not rec.get("question_text").strip():
            # questions_single_transcript.csv ends with a placeholder row (id 20, no text): not a question.
            warnings.warn(f"{path}, record {rec.record}: empty question_text, row skipped", stacklevel=2)
            continue
        question = Question(
            question_id=f"{id_prefix}{rec.text('question_id')}",
            question=rec.get("question_text"),
            question_type=question_type,
            metadata={"no_gold_answers": True},
        )
        pairs.append((rec, question))
    return _unique_questions(pairs, "question_id")


def _episode_part(doc: Document) -> Document:
    match = re.fullmatch(r"(.+)-part(\d+)", doc.title)
    if match:
        doc.metadata.update(episode=match[1], part=int(match[2]))
    return doc


def _transcript_date(doc: Document) -> Document:
    # Header lines give the call date in several spellings ("Thursday April 27th, 2017"); the
    # fiscal quarter in the file name is the reliable key, the date is a convenience.
    match = re.search(rf"({_MONTHS})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", doc.text[:600])
    if match:
        month = _MONTHS.split("|").index(match[1]) + 1
        doc.date = f"{match[3]}-{month:02d}-{int(match[2]):02d}"
    quarter = re.search(r"FY(\d{2})Q(\d)", doc.title)
    if quarter:
        doc.metadata["fiscal_quarter"] = f"FY{quarter[1]}Q{quarter[2]}"
    return doc


def _podcast(root: Path) -> DocsAndQuestions:
    folder = root / "kevin_scott_podcast"
    documents = [_episode_part(d) for d in _text_documents(folder / "input", ("*.txt",), ())]
    return documents, _csv_questions(folder / "questions.csv", "", "global")


def _msft_earnings(root: Path) -> DocsAndQuestions:
    folder = root / "msft_earnings"
    documents = [_transcript_date(d) for d in _text_documents(folder / "input", ("*.txt",), ())]
    questions = [
        *_csv_questions(folder / "questions_multi_transcript.csv", "multi-", "multi_transcript"),
        *_csv_questions(folder / "questions_single_transcript.csv", "single-", "single_transcript"),
    ]
    return documents, questions


@_loader("graphrag_podcast")
def _graphrag_podcast(root: Path, *, subset: str = "podcast") -> DocsAndQuestions:
    """GraphRAG-paper data (microsoft/graphrag-benchmarking-datasets); no gold answers exist.

    subset "podcast" (default): 1,669 pre-chunked "Behind the Tech" transcript parts (doc_id = file
    name, metadata episode and part) + the 125 global questions (question_id = upstream UUID,
    question_type "global"). subset "msft_earnings": 41 earnings-call transcripts (date from the
    header, metadata fiscal_quarter) + 20 multi- and 20 single-transcript questions (ids "multi-<n>",
    "single-<n>"; the blank placeholder row 20 of the single file is skipped with a warning).
    """
    subset = _choose("subset", subset, ("podcast", "msft_earnings"))
    return _podcast(root) if subset == "podcast" else _msft_earnings(root)
