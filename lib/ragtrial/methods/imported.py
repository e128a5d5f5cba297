"""Bring your own answers: a method whose answers some other system wrote to a file.

The file format and its validation: ragtrial.data.answer_files.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ragtrial.data.answer_files import ImportedAnswer
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.tokens import count_tokens
from ragtrial.methods.base import Answer, Draft, Generator, Method
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem

NOT_ANSWERED = "not_answered"


class ImportedMethod(Method):
    """A method answering from a file (bring your own answers): its text, its context, and the
    calls, tokens and latency the file states (0 where it states nothing); a question the file does
    not answer fails as `not_answered`, and a row with a failure fails with it, never scored.
    """

    regenerable = False
    not_regenerable = "an imported answer cannot be regenerated"

    def __init__(
        self,
        name: str,
        generator: Generator,
        ledger: Ledger,
        answers: dict[str, ImportedAnswer],
        source: Path,
        index: GraphIndex,
    ):
        doc_of_chunk = dict(zip(index.chunks["chunk_id"], index.chunks["doc_id"], strict=True))
        super().__init__(name, generator, ledger, doc_of_chunk)
        self.answers, self.source = answers, source
        self._texts = {
            kind: dict(zip(table[key], table[text], strict=True))
            for kind, table, key, text in (
                ("chunk", index.chunks, "chunk_id", "text"),
                ("entity", index.entities, "entity_id", "description"),
                ("relation", index.relations, "relation_id", "description"),
            )
        }

    def _context(self, row: ImportedAnswer) -> list[ContextItem]:
        items = []
        for kind, ids in (
            ("chunk", row.chunk_ids),
            ("entity", row.entity_ids),
            ("relation", row.relation_ids),
        ):
            for i, id_ in enumerate(ids):
                # The system's own text of the chunk when it lists one per chunk id, else the index's.
                text = (
                    row.contexts[i]
                    if kind == "chunk" and len(row.contexts) == len(ids)
                    else self._texts[kind].get(id_, "")
                )
                items.append(ContextItem(kind, text, 0.0, "imported", **{f"{kind}_ids": [id_]}))
        if not row.chunk_ids or len(row.contexts) != len(row.chunk_ids):
            items += [ContextItem("imported", text, 0.0, "imported") for text in row.contexts]
        return items

    def fill(self, question: Question, draft: Draft) -> None:
        row = self.answers[question.question_id]
        draft.context = self._context(row)
        draft.context_tokens = {}
        for item in draft.context:
            draft.context_tokens[item.kind] = draft.context_tokens.get(item.kind, 0) + count_tokens(item.text)
        draft.context_ready = bool(draft.context)
        draft.text = row.text
        draft.notes["imported"] = str(self.source)

    def answer(self, question: Question) -> Answer:
        row = self.answers.get(question.question_id)
        if row is None:
            detail = f"imported: {self.source} has no answer to question {question.question_id!r}"
            return Answer(
                question.question_id,
                self.name,
                "",
                [],
                {},
                0,
                0,
                0,
                0.0,
                failure=NOT_ANSWERED,
                notes={"imported": str(self.source)},
                failures=[{"stage": "answer", "kind": NOT_ANSWERED, "detail": detail}],
            )
        answered = super().answer(question)  # no model call: the tally is empty, the costs are the file's
        failures = []
        if row.failure:
            detail = f"imported: {self.source} record {row.record}: {row.failure}"
            failures = [{"stage": "answer", "kind": row.failure, "detail": detail}]
        return dataclasses.replace(
            answered,
            text="" if row.failure else row.text,
            failure=row.failure,
            failures=failures,
            calls=row.calls,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            latency_s=row.latency_s,
        )
