"""Typed loaders for the real evaluation data sets → `records.Dataset`.

One registry, `LOADERS` (`LOADERS.get(name)(path, **options)`; each entry's metadata says where the
data set was published), or `load_dataset(name, path, **options)`. `path` is the data set's
folder (e.g. `../shared/datasets/multihop_rag` beside this project). Every loader accepts the
sampling options

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
file stem; GraphRAG-Bench: `corpus_name`; NovelQA books: `novelqa-<book file stem>`; folders of text
files: the relative path), otherwise derived from a stable field (MultiHop-RAG: hash of the article url;
Natural Questions: hash of the page url; query logs: `log-` + hash of the normalized question) or the
position (QMSum: `qmsum-test-<line>`).
"""

# Importing the data-set modules registers their loaders in LOADERS.
from ragtrial.data import (  # noqa: F401
    answer_files,
    graphrag,
    multihop_qa,
    natural_questions,
    novelqa,
    query_log,
    summarization,
    text_folders,
    ultradomain,
)
from ragtrial.data.graphrag import NOVEL_CORPUS_MISSING
from ragtrial.data.registry import LOADERS, DocsAndQuestions, load_dataset
from ragtrial.data.text_folders import DEFAULT_EXCLUDE
from ragtrial.records import DataError

__all__ = [
    "DEFAULT_EXCLUDE",
    "LOADERS",
    "NOVEL_CORPUS_MISSING",
    "DataError",
    "DocsAndQuestions",
    "load_dataset",
]
