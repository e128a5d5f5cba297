"""Query-focused summarization loaders: QMSum, SQuALITY and ODSum (meetings and stories)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragtrial.data.reading import (
    FieldReader,
    _has_text,
    _stable_hash,
    choose,
    dedupe,
    json_lines,
    json_object,
    type_name,
)
from ragtrial.data.registry import DocsAndQuestions, check_unique, register_loader, unique_questions
from ragtrial.data.text_folders import text_documents
from ragtrial.records import Document, Question

# ---------------------------------------------------------------- QMSum


def _turn_spans(rec: FieldReader, key: str, n_turns: int) -> list[list[int]]:
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


def _qmsum_meeting(rec: FieldReader, doc_id: str) -> Document:
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


def _qmsum_questions(rec: FieldReader, doc: Document) -> list[tuple[FieldReader, Question]]:
    pairs: list[tuple[FieldReader, Question]] = []
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
            _check_repeated_query(item, question, pairs)
            pairs.append((item, question))
    return pairs


def _check_repeated_query(
    item: FieldReader, question: Question, earlier: list[tuple[FieldReader, Question]]
) -> None:
    """A query repeated in one meeting: with the same answer it is a duplicated record (an error);
    with another answer it is two questions as published (test meeting 30 asks "What change has
    occurred to the segmenter?" of two spans), kept and reported as a data warning.
    """
    for rec, other in earlier:
        if other.question != question.question:
            continue
        if other.reference_summaries == question.reference_summaries:
            raise item.error("query", f"duplicate query (same query and answer as {rec.prefix.rstrip('.')})")
        item.warn("query", f"same query text as {rec.prefix.rstrip('.')}, another answer: both kept")


@register_loader("qmsum")
def _qmsum(root: Path, *, split: str = "test") -> DocsAndQuestions:
    """QMSum query-focused meeting summarization: <split>.jsonl, one meeting per line.

    doc_id = "qmsum-<split>-<n>" (n = 0-based record number; the data has no meeting id); text = one
    "speaker: content" line per turn. Questions: question_type general / specific, the meeting as
    the gold document, the reference answer in reference_summaries (answers stay empty), and for
    specific queries the relevant turn spans (metadata relevant_text_span, inclusive [start, end]).
    A repeated meeting, or a query repeated in a meeting with the same answer, raises DataError; a
    query text repeated with another answer (once in the test split) is kept, as a data warning.
    """
    records = json_lines(root / f"{split}.jsonl")
    documents, pairs = [], []
    for n, rec in enumerate(records):
        doc = _qmsum_meeting(rec, f"qmsum-{split}-{n:03d}")
        documents.append(doc)
        pairs.extend(_qmsum_questions(rec, doc))
    # The ids are positions, so a repeated meeting would load twice: its transcript is the natural key.
    transcripts = (
        (f"transcript sha1 {_stable_hash(d.text)}", r) for r, d in zip(records, documents, strict=True)
    )
    check_unique(transcripts, "meeting_transcripts", "meeting")
    return documents, [q for _, q in pairs]


# ---------------------------------------------------------------- SQuALITY and ODSum


def _story_questions(
    items: list[FieldReader], doc_id: str, id_prefix: str = ""
) -> list[tuple[FieldReader, Question]]:
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


def _gutenberg_id(rec: FieldReader) -> tuple[str, dict[str, Any]]:
    meta = rec.at("metadata", rec.get("metadata", dict))
    passage_id = meta.text("passage_id")
    return f"gutenberg-{passage_id}", {"passage_id": passage_id, "uid": meta.get("uid")}


@register_loader("squality")
def _squality(root: Path, *, split: str = "test") -> DocsAndQuestions:
    """SQuALITY v1.3 question-focused summarization: <split>.jsonl, one story per line.

    doc_id = "gutenberg-<Project Gutenberg ebook id>" (metadata.passage_id). Five questions per story,
    question_id "<doc_id>-q<number>", four reference_summaries each; question_type "general" for the
    plot question (number 1), "specific" for the others.
    """
    records = json_lines(root / f"{split}.jsonl")
    documents, pairs = [], []
    for rec in records:
        doc_id, meta = _gutenberg_id(rec)
        documents.append(Document(doc_id=doc_id, text=rec.text("document"), metadata=meta))
        pairs.extend(_story_questions(rec.items("questions"), doc_id))
    check_unique(
        ((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "metadata.passage_id", "story id"
    )
    return documents, unique_questions(pairs, "question_number")


def _odsum_meeting(root: Path) -> DocsAndQuestions:
    folder = root / "meeting" / "documents"
    # The meeting id (file stem) is what meetings_list refers to, so it is the doc_id here.
    # Upstream Bro024.txt is empty yet named by 5 queries: kept (flagged metadata empty=True) so the
    # gold lists stay as published; retrieval can never find it, which the metrics should show.
    texts = text_documents(folder, ("*.txt",), (), keep_empty=True)
    documents = [d.model_copy(update={"doc_id": d.title}) for d in texts]
    known = {d.doc_id for d in documents}
    questions = []
    for rec in json_object(root / "meeting" / "queries.json"):
        meetings = rec.strings("meetings_list")
        for i, meeting in enumerate(meetings):
            if meeting not in known:
                raise rec.error(f"meetings_list[{i}]", f"no meeting document {meeting}.txt in {folder}")
        questions.append(
            Question(
                question_id=f"odsum-meeting-{rec.record}",
                question=rec.text("query"),
                gold_doc_ids=dedupe(meetings),
                reference_summaries=[rec.text("answer")],
                metadata={"n_documents": len(meetings)},
            )
        )
    return documents, questions


def _odsum_story_document(rec: FieldReader) -> Document:
    doc_id, meta = _gutenberg_id(rec)
    chunks = rec.strings("divided_document")
    if not _has_text("".join(chunks)):
        raise rec.error("divided_document", f"no text in its {len(chunks)} chunks")
    # Chunks end in their own whitespace: joining with "" restores the story, and the offsets
    # let ODSum's chunking be reproduced.
    starts = [sum(len(c) for c in chunks[:i]) for i in range(len(chunks))]
    return Document(
        doc_id=doc_id,
        title=rec.text("title"),
        text="".join(chunks),
        metadata={**meta, "chunk_starts": starts},
    )


def _odsum_story_group(rec: FieldReader) -> tuple[str, list[FieldReader]]:
    if not isinstance(rec.value, list) or not rec.value:
        raise rec.error(None, f"expected a non-empty array of questions, got {type_name(rec.value)}")
    items = [rec.at(f"[{i}]", v) for i, v in enumerate(rec.value)]
    titles = {item.text("title") for item in items}
    if len(titles) != 1:
        raise rec.error(
            "title", f"one line must hold the questions of one story, got titles {sorted(titles)}"
        )
    return titles.pop(), items


def _odsum_story(root: Path) -> DocsAndQuestions:
    docs_path = root / "story" / "documents_test.jsonl"
    records = json_lines(docs_path)
    documents = [_odsum_story_document(r) for r in records]
    check_unique(((d.title, r) for r, d in zip(records, documents, strict=True)), "title", "story title")
    by_title = {d.title: d.doc_id for d in documents}
    pairs, seen = [], set()
    for rec in json_lines(root / "story" / "queries.jsonl"):
        title, items = _odsum_story_group(rec)
        # queries.jsonl covers all SQuALITY splits; only the test stories' documents are in the copy.
        if title in by_title:
            seen.add(title)
            pairs.extend(_story_questions(items, by_title[title], "odsum-story-"))
    for rec, doc in zip(records, documents, strict=True):
        if doc.title not in seen:
            raise rec.error("title", "no question group in story/queries.jsonl has this title")
    return documents, unique_questions(pairs, "question_number")


@register_loader("odsum")
def _odsum(root: Path, *, subset: str = "meeting") -> DocsAndQuestions:
    """ODSum open-domain query-focused summarization; subset "meeting" (default) or "story".

    meeting: 232 transcripts (doc_id = meeting id = file stem), 436 queries "odsum-meeting-<key>"
    whose gold documents are their meetings_list; reference_summaries = [answer].
    story: the 52 SQuALITY test stories (doc_id "gutenberg-<ebook id>", title, text = the ODSum chunks
    joined; metadata chunk_starts) and their 5 open-domain questions each (260; 4 references each).
    queries.jsonl also holds the questions of the 75 train/dev stories whose documents are not in this
    copy: those are left out by design; a test story without questions raises DataError.
    """
    subset = choose("subset", subset, ("meeting", "story"))
    return _odsum_meeting(root) if subset == "meeting" else _odsum_story(root)
