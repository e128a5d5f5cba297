"""NovelQA as published (NovelQA/NovelQA on Hugging Face): books as text, `Books/<part>/<book>.txt`,
and their questions as JSON, `Data/<part>/<book>.json`, for the parts PublicDomain and
CopyrightProtected.
"""

from __future__ import annotations

from pathlib import Path

from ragtrial.data.reading import FieldReader, _read_json, read_text, type_name
from ragtrial.data.registry import DocsAndQuestions, register_loader, unique_questions
from ragtrial.records import DataError, Document, Question

PARTS = ("PublicDomain", "CopyrightProtected")


def _records(path: Path) -> list[tuple[str, FieldReader]]:
    """(QID, record) of a book's question file. The files on Hugging Face are objects keyed by QID;
    the NovelQA README shows an array of records that carry "QID": both are read.
    """
    data = _read_json(path)
    if isinstance(data, dict):
        return [(qid, FieldReader(path, qid, value)) for qid, value in data.items()]
    if isinstance(data, list):
        records = [FieldReader(path, i, value) for i, value in enumerate(data)]
        return [(rec.text("QID"), rec) for rec in records]
    raise DataError(
        str(path), None, None, f"expected a JSON object or array at top level, got {type_name(data)}"
    )


def _complexity(rec: FieldReader) -> str:
    # The README's own example spells the field "Complex"; its field list (and the files) "Complexity".
    spelled_short = isinstance(rec.value, dict) and "Complexity" not in rec.value and "Complex" in rec.value
    return rec.text("Complex" if spelled_short else "Complexity")


def _question(rec: FieldReader, qid: str, book_id: str, doc_id: str) -> Question:
    options_rec = rec.at("Options", rec.get("Options", dict))
    options = {letter: options_rec.text(letter) for letter in options_rec.value}
    if len(options) < 2:
        raise rec.error("Options", f"{len(options)} option(s); a question has at least two")
    aspect, complexity = rec.text("Aspect"), _complexity(rec)
    metadata: dict = {
        "book_id": book_id,
        "qid": qid,
        "aspect": aspect,
        "complexity": complexity,
        "options": options,
    }
    answers: list[str] = []
    if isinstance(rec.value, dict) and "Answer" in rec.value:  # the public release withholds the gold answers
        letter = rec.one_of("Answer", options, "option")
        answers, metadata["answer_option"] = [options[letter]], letter
    else:
        metadata["no_gold_answers"] = True
    return Question(
        question_id=f"novelqa-{book_id}-{qid}",
        question=rec.text("Question"),
        answers=answers,
        question_type=f"{complexity}-{aspect}",
        gold_doc_ids=[doc_id],
        metadata=metadata,
    )


@register_loader("novelqa")
def _novelqa(root: Path) -> DocsAndQuestions:
    """NovelQA: Books/<part>/<book>.txt and Data/<part>/<book>.json (parts PublicDomain, CopyrightProtected).

    One book = one document, doc_id = "novelqa-<book>" (the file stem, e.g. B00), title = the book's
    title from bookmeta.json when present, else the stem. Every question file needs its book's
    text. question_id = "novelqa-<book>-<QID>"; question_type = "<Complexity>-<Aspect>", e.g.
    "mh-times" (complexities x aspects: Han et al.'s 21 query types); the options are in metadata.
    The public release withholds the gold answers (they are scored on Codabench): a question without
    an "Answer" option letter has metadata no_gold_answers=True; with one, answers = that option's text.
    """
    titles = _titles(root / "bookmeta.json")
    documents, pairs = [], []
    for part in PARTS:
        folder = root / "Data" / part
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            book_id = path.stem
            text = read_text(root / "Books" / part / f"{book_id}.txt")
            if not text.strip():
                raise DataError(str(root / "Books" / part / f"{book_id}.txt"), None, "text", "empty book")
            doc_id = f"novelqa-{book_id}"
            documents.append(
                Document(doc_id=doc_id, title=titles.get(book_id, book_id), text=text, source=part,
                         metadata={"book_id": book_id, "part": part})
            )  # fmt: skip
            pairs += [(rec, _question(rec, qid, book_id, doc_id)) for qid, rec in _records(path)]
    if not documents:
        raise DataError(
            str(root / "Data"), None, None, f"no question files (Data/<part>/<book>.json, parts {PARTS})"
        )
    return documents, unique_questions(pairs, "QID")


def _titles(path: Path) -> dict[str, str]:
    """Book titles from bookmeta.json ({book: {"title": ...}}), when the file is there."""
    if not path.is_file():
        return {}
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(str(path), None, None, f"expected a JSON object at top level, got {type_name(data)}")
    return {book: FieldReader(path, book, meta).text("title") for book, meta in data.items()}
