"""Natural Questions in its simplified format (google-research-datasets/natural-questions,
gs://natural_questions/v1.0-simplified/simplified-nq-train.jsonl.gz): one example per line, the
Wikipedia page as space-separated tokens (HTML tags are tokens), answers as token spans into it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ragtrial.data.reading import FieldReader, _stable_hash, dedupe, json_lines
from ragtrial.data.registry import DocsAndQuestions, register_loader, unique_questions
from ragtrial.records import Document, Question

SIMPLIFIED_TRAIN = "simplified-nq-train.jsonl"
_HTML_TOKEN = re.compile(r"</?[A-Za-z][A-Za-z0-9]*>")
# Closing tags that end a block: the page text gets a line break there.
_BLOCK_END = re.compile(r"</(?:P|H[1-6]|Tr|Li|Dd|Dt|Table|Ul|Ol|Dl)>")
_YES_NO = ("NONE", "YES", "NO")


def _span_text(tokens: list[str], start: int, end: int) -> str:
    return " ".join(t for t in tokens[start:end] if not _HTML_TOKEN.fullmatch(t))


def _page_text(tokens: list[str]) -> str:
    lines: list[str] = []
    line: list[str] = []
    for token in tokens:
        if _BLOCK_END.fullmatch(token):
            lines.append(" ".join(line))
            line = []
        elif not _HTML_TOKEN.fullmatch(token):
            line.append(token)
    lines.append(" ".join(line))
    return "\n".join(x for x in lines if x)


def _page_title(url: str) -> str:
    # The published urls escape '&' as '&amp;': ".../index.php?title=Email_marketing&amp;oldid=814979211".
    titles = parse_qs(urlsplit(html.unescape(url)).query).get("title", [])
    return titles[0].replace("_", " ") if titles else ""


def _span(rec: FieldReader, n_tokens: int) -> tuple[int, int]:
    """A token span [start_token, end_token), checked against the page."""
    start, end = rec.get("start_token", int), rec.get("end_token", int)
    if not 0 <= start < end <= n_tokens:
        raise rec.error("start_token", f"span [{start}, {end}) outside the page's {n_tokens} tokens")
    return start, end


def _long_span(rec: FieldReader, n_tokens: int) -> list[int] | None:
    """An annotation's long answer span; None for the published "no long answer" (-1, -1)."""
    if (rec.get("start_token", int), rec.get("end_token", int)) == (-1, -1):
        return None
    return list(_span(rec, n_tokens))


def _answers(rec: FieldReader, tokens: list[str]) -> tuple[list[str], list[list[int] | None], list[str]]:
    """(short answers, then yes / no; each annotation's long-answer span; each one's yes_no_answer)."""
    answers, long_spans, yes_no = [], [], []
    for note in rec.items("annotations"):
        for short in note.items("short_answers"):
            start, end = _span(short, len(tokens))
            if text := _span_text(tokens, start, end):
                answers.append(text)
            else:
                short.warn("start_token", "short answer span holds only HTML tag tokens; not an answer")
        verdict = note.one_of("yes_no_answer", _YES_NO, "yes/no answer")
        if verdict != "NONE":
            answers.append(verdict.lower())
        yes_no.append(verdict)
        long_spans.append(_long_span(note.at("long_answer", note.get("long_answer", dict)), len(tokens)))
    return dedupe(answers), long_spans, yes_no


@register_loader("natural_questions")
def _natural_questions(root: Path, *, file: str = SIMPLIFIED_TRAIN) -> DocsAndQuestions:
    """Natural Questions, simplified format: <file> (JSON Lines), one question and its Wikipedia page a line.

    The published file is gzipped (v1.0-simplified/simplified-nq-train.jsonl.gz, 307,373 examples):
    unzip it; a slice of its lines (`head -n N`) is a valid file too. doc_id = "nq-" +
    sha1(document_url)[:12]: one document per page url (a url seen twice must carry the same text);
    text = the page without its HTML tag tokens, a line per block; title from the url.
    question_id = "nq-<example_id>". answers = every annotation's short answers (token spans, tag
    tokens dropped), then "yes" / "no" for a yes/no answer; a question with only a long answer (or
    none) has no gold answer and metadata no_gold_answers=True. question_type "single_hop".
    """
    documents: dict[str, Document] = {}
    pairs = []
    for rec in json_lines(root / file):
        url, page = rec.text("document_url"), rec.text("document_text")
        tokens = page.split(" ")
        doc_id = f"nq-{_stable_hash(url)}"
        text = _page_text(tokens)
        if not text:
            raise rec.error("document_text", "no text outside the HTML tag tokens")
        if doc_id not in documents:
            documents[doc_id] = Document(
                doc_id=doc_id, title=_page_title(url), text=text, source=url, metadata={"url": url}
            )
        elif documents[doc_id].text != text:
            raise rec.error("document_text", f"differs from an earlier record's text of the same page {url}")
        example_id = rec.get("example_id", (int, str))
        answers, long_spans, yes_no = _answers(rec, tokens)
        question = Question(
            question_id=f"nq-{example_id}",
            question=rec.text("question_text"),
            answers=answers,
            question_type="single_hop",
            gold_doc_ids=[doc_id],
            metadata={
                "example_id": example_id,
                "long_answer_spans": long_spans,
                "yes_no_answers": yes_no,
                **({} if answers else {"no_gold_answers": True}),
            },
        )
        pairs.append((rec, question))
    return list(documents.values()), unique_questions(pairs, "example_id")
