"""Text that a model or an endpoint wrote, made inert inside a report's Markdown.

nbconvert renders Markdown with raw HTML passed through and every link protocol allowed, so a
model's `<img src=x onerror=...>` or `[x](javascript:...)` would become a live element of
`report.html`. Every such string goes through one of these functions before it enters Markdown;
tables stay DataFrames, which pandas renders escaped.
"""

from __future__ import annotations

import html
import re

# every ASCII punctuation character CommonMark lets a backslash escape, less the & and ; of the
# entities html.escape writes (which already make their characters literal)
_MARKDOWN_PUNCTUATION = re.compile(r"([!\"#$%'()*+,\-./:<=>?@\[\\\]^_`{|}~])")
_LINK_BRACKETS = re.compile(r"([\[\]])")


def _inert_html(text: object) -> str:
    """HTML special characters as entities: no tag, comment or autolink can start."""
    return html.escape(str(text), quote=False)


def escape_markdown(text: object) -> str:
    """`text` shown exactly as written: no HTML, no link, and no Markdown formatting of its own."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", _inert_html(text))


def table_cell(value: object) -> str:
    """`value` as the literal content of one Markdown table cell (its `|` and line breaks included)."""
    return escape_markdown(value).replace("\r", " ").replace("\n", " ")


def model_markdown(markdown: str, levels: int = 3) -> str:
    """Model-written Markdown shown inside a report: headings, lists and emphasis still render,
    but it carries no HTML, link or image (brackets escaped), and its headings sit `levels` below
    the report's own.
    """
    inert = _LINK_BRACKETS.sub(r"\\\1", _inert_html(markdown))
    return re.sub(r"^(#+) ", "#" * levels + r"\1 ", inert, flags=re.M)
