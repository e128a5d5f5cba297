"""GraphRAG data-set loaders: GraphRAG-Bench and the GraphRAG paper's podcast / MSFT earnings sets."""

from __future__ import annotations

import re
from pathlib import Path

from ragtrial.data.reading import FieldReader, choose, csv_rows, json_array
from ragtrial.data.registry import DocsAndQuestions, check_unique, register_loader, unique_questions
from ragtrial.data.text_folders import text_documents
from ragtrial.records import DataError, Document, Question

NOVEL_CORPUS_MISSING = (
    "the GraphRAG-Bench Novel corpus is not in this copy (upstream Datas/Corpus/novel.json was not "
    "obtainable); it is published in GitHub repo GraphRAG-Bench/GraphRAG-Benchmark at "
    "Datas/Corpus/novel.json (see graphrag-bench.github.io). Save it here as novel_corpus.json to load "
    "the novel questions"
)


# ---------------------------------------------------------------- GraphRAG-Bench

_BENCH_LEVELS = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize", "Creative Generation")


def _bench_question(rec: FieldReader, doc_ids: set[str], corpus: Path) -> Question:
    source = rec.text("source")
    if source not in doc_ids:
        raise rec.error("source", f"matches no corpus_name in {corpus.name}")
    level = rec.one_of("question_type", _BENCH_LEVELS, "level")
    return Question(
        question_id=rec.text("id"),
        question=rec.text("question"),
        answers=[rec.text("answer")],
        question_type=level,
        gold_doc_ids=[source],
    )


def _disambiguate(pairs: list[tuple[FieldReader, Question]]) -> list[tuple[FieldReader, Question]]:
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


@register_loader("graphrag_bench")
def _graphrag_bench(root: Path, *, subset: str = "medical") -> DocsAndQuestions:
    """GraphRAG-Bench: <subset>_corpus.json ([{corpus_name, context}]) + <subset>_questions.json.

    subset "medical" (default): one document (doc_id "Medical", the whole 1.05 M-char corpus — chunk it
    downstream), 2,062 questions whose gold document is their `source`. question_type = level (Fact
    Retrieval / Complex Reasoning / Contextual Summarize / Creative Generation); answers = [reference].
    subset "novel": the corpus is not in the shared copy, so this raises DataError saying where it is
    published; with the file present it loads the same way (one document per book, gold = source).
    """
    subset = choose("subset", subset, ("medical", "novel"))
    corpus = root / f"{subset}_corpus.json"
    if subset == "novel" and not corpus.is_file():
        raise DataError(str(corpus), None, None, NOVEL_CORPUS_MISSING)
    records = json_array(corpus)
    documents = [
        Document(doc_id=r.text("corpus_name"), title=r.text("corpus_name"), text=r.text("context"))
        for r in records
    ]
    check_unique(
        ((d.doc_id, r) for r, d in zip(records, documents, strict=True)), "corpus_name", "corpus name"
    )
    doc_ids = {d.doc_id for d in documents}
    pairs = [(r, _bench_question(r, doc_ids, corpus)) for r in json_array(root / f"{subset}_questions.json")]
    return documents, unique_questions(_disambiguate(pairs), "id")


# ---------------------------------------------------------------- GraphRAG paper podcast / MSFT earnings

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def _csv_questions(path: Path, id_prefix: str, question_type: str) -> list[Question]:
    pairs = []
    for rec in csv_rows(path, ("question_text", "question_id")):
        if not rec.get("question_text").strip():
            # questions_single_transcript.csv ends with a placeholder row (id 20, no text): not a question.
            rec.warn("question_text", "empty, row skipped")
            continue
        question = Question(
            question_id=f"{id_prefix}{rec.text('question_id')}",
            question=rec.get("question_text"),
            question_type=question_type,
            metadata={"no_gold_answers": True},
        )
        pairs.append((rec, question))
    return unique_questions(pairs, "question_id")


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
    documents = [_episode_part(d) for d in text_documents(folder / "input", ("*.txt",), ())]
    return documents, _csv_questions(folder / "questions.csv", "", "global")


def _msft_earnings(root: Path) -> DocsAndQuestions:
    folder = root / "msft_earnings"
    documents = [_transcript_date(d) for d in text_documents(folder / "input", ("*.txt",), ())]
    questions = [
        *_csv_questions(folder / "questions_multi_transcript.csv", "multi-", "multi_transcript"),
        *_csv_questions(folder / "questions_single_transcript.csv", "single-", "single_transcript"),
    ]
    return documents, questions


@register_loader("graphrag_podcast")
def _graphrag_podcast(root: Path, *, subset: str = "podcast") -> DocsAndQuestions:
    """GraphRAG-paper data (microsoft/graphrag-benchmarking-datasets); no gold answers exist.

    subset "podcast" (default): 1,669 pre-chunked "Behind the Tech" transcript parts (doc_id = file
    name, metadata episode and part) + the 125 global questions (question_id = upstream UUID,
    question_type "global"). subset "msft_earnings": 41 earnings-call transcripts (date from the
    header, metadata fiscal_quarter) + 20 multi- and 20 single-transcript questions (ids "multi-<n>",
    "single-<n>"; the blank placeholder row 20 of the single file is skipped with a warning).
    """
    subset = choose("subset", subset, ("podcast", "msft_earnings"))
    return _podcast(root) if subset == "podcast" else _msft_earnings(root)
