"""UltraDomain (MemoRAG; the LightRAG paper's pairwise-judged domains): the cs questions KAG ships."""

from __future__ import annotations

from pathlib import Path

from ragtrial.data.reading import json_array
from ragtrial.data.registry import DocsAndQuestions, register_loader, unique_questions
from ragtrial.data.text_folders import text_documents
from ragtrial.records import Question


@register_loader("ultradomain")
def _ultradomain(root: Path, *, corpus_path: str | None = None) -> DocsAndQuestions:
    """UltraDomain cs as KAG ships it: questions.json (100 questions over 10 computer-science books).

    question_id = `_id`, question = `input`, answers = the reference answers (`answers`), question_type
    "cs", metadata title (the book, `context`) and context_id. The books were not copied (in copyright),
    so there are no documents; `corpus_path`: a folder holding the books as .md files (KAG's
    builder/data), relative to the data set's folder unless absolute, whose files are then the documents.
    """
    pairs = []
    for rec in json_array(root / "questions.json"):
        question = Question(
            question_id=rec.text("_id"),
            question=rec.text("input"),
            answers=rec.strings("answers"),
            question_type="cs",
            metadata={"title": rec.text("context"), "context_id": rec.text("context_id")},
        )
        pairs.append((rec, question))
    documents = text_documents(root / corpus_path, ("*.md",), ()) if corpus_path else []
    return documents, unique_questions(pairs, "_id")
