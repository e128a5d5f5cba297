"""Chunking: token windows (GraphRAG: 600 tokens, 100 overlap, cl100k) or one chunk per document."""

from __future__ import annotations

import pandas as pd

from ragtrial.config.index import IndexSettings
from ragtrial.index.tables import SCHEMAS, conform_table, short_hash
from ragtrial.llm.tokens import get_encoding

# ---------------------------------------------------------------- chunking


def make_chunk_id(doc_id: str, position: int, scheme: str) -> str:
    """Stable id: the same document cut the same way gives the same ids in every run."""
    return "chk-" + short_hash(doc_id, position, scheme)


def chunk_documents(
    documents_df: pd.DataFrame, chunk_size: int = 600, overlap: int = 100, encoding: str = "cl100k_base"
) -> pd.DataFrame:
    """Token windows of `chunk_size` tokens, each starting `chunk_size - overlap` after the previous.

    The last window of a document ends at the document's end (a short document is one chunk);
    documents with no tokens give no chunks. Windows are cut on token boundaries as GraphRAG does,
    so a multi-byte character split by a boundary decodes to U+FFFD on both sides.
    """
    if chunk_size <= 0 or not 0 <= overlap < chunk_size:
        raise ValueError(f"need chunk_size > 0 and 0 <= overlap < chunk_size, got {chunk_size}, {overlap}")
    enc = get_encoding(encoding)
    scheme = f"tokens:{encoding}:{chunk_size}:{overlap}"
    step = chunk_size - overlap
    rows = []
    docs = documents_df[["doc_id", "text"]]
    for doc_id, tokens in zip(docs["doc_id"], enc.encode_ordinary_batch(list(docs["text"])), strict=True):
        starts = range(0, max(len(tokens) - overlap, 1), step) if tokens else range(0)
        for position, start in enumerate(starts):
            window = tokens[start : start + chunk_size]
            rows.append(
                (make_chunk_id(doc_id, position, scheme), doc_id, position, enc.decode(window), len(window))
            )
    return conform_table("chunks", pd.DataFrame(rows, columns=list(SCHEMAS["chunks"])))


def documents_as_chunks(
    documents_df: pd.DataFrame, encoding: str = "cl100k_base", titled: bool = False
) -> pd.DataFrame:
    """One chunk per document, for corpora that arrive pre-chunked (podcast parts, passages); `titled`:
    the document's title on the chunk's first line (when it has one).
    """
    enc = get_encoding(encoding)
    texts = list(documents_df["text"])
    if titled:
        texts = [
            f"{title}\n{text}" if title else text
            for title, text in zip(documents_df["title"], texts, strict=True)
        ]
    counts = [len(t) for t in enc.encode_ordinary_batch(texts)]
    rows = [
        (make_chunk_id(doc_id, 0, "document"), doc_id, 0, text, n)
        for doc_id, text, n in zip(documents_df["doc_id"], texts, counts, strict=True)
    ]
    return conform_table("chunks", pd.DataFrame(rows, columns=list(SCHEMAS["chunks"])))


def chunks_for(documents_df: pd.DataFrame, settings: IndexSettings) -> pd.DataFrame:
    """The chunks `settings.chunking` asks for: token windows, or one chunk per document (titled or not)."""
    if settings.chunking in ("documents", "titled_documents"):
        return documents_as_chunks(documents_df, titled=settings.chunking == "titled_documents")
    return chunk_documents(documents_df, settings.chunk_size, settings.chunk_overlap)
