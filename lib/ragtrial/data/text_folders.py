"""Folders of text files: the `text_folder` loader and the file reader ODSum and the GraphRAG sets share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ragtrial.data.reading import data_warning, read_text
from ragtrial.data.registry import DocsAndQuestions, register_loader
from ragtrial.records import DataError, Document

# Documentation files that sit next to the data in the shared copies; never corpus text.
DEFAULT_EXCLUDE = ("SOURCE.md", "README.md", "UPSTREAM_README.md", "NOTICE.md", "LICENSE*")


def _natural_key(path: Path) -> list[Any]:
    # "part2" before "part10": chunked transcripts keep their reading order.
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.as_posix())]


def text_documents(
    root: Path, patterns: Sequence[str], exclude: Sequence[str], *, keep_empty: bool = False
) -> list[Document]:
    """One Document per matching file; an empty file raises unless `keep_empty` (then it is a data
    warning: the published data set has it).
    """
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
        text = read_text(file)
        doc = Document(doc_id=file.relative_to(root).as_posix(), title=file.stem, text=text)
        if not text.strip():  # read_text refuses NUL bytes, so this is all a blank file can hold
            if not keep_empty:
                raise DataError(str(file), None, "text", "empty file")
            data_warning(DataError(str(file), None, "text", "empty file, kept as an empty document"))
            doc.metadata["empty"] = True
        documents.append(doc)
    return documents


@register_loader("text_folder")
def _text_folder(
    root: Path, *, patterns: Sequence[str] = ("*.txt", "*.md"), exclude: Sequence[str] = DEFAULT_EXCLUDE
) -> DocsAndQuestions:
    """Any folder of text files, searched recursively (hidden files skipped); no questions.

    doc_id = path relative to the folder, title = file stem. `patterns` selects files by name,
    `exclude` drops documentation files (SOURCE.md, README.md, LICENSE*, … by default).
    """
    return text_documents(root, patterns, exclude), []
