"""Every method of the registry that the small NLP index supports answers the same at
llm.concurrency 1 and 8: retrievers (and their own model calls) run for several questions at once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pandas as pd
from conftest import make_llm

from ragtrial.config import Settings
from ragtrial.data.synthetic import generate_corpus
from ragtrial.evaluation.run_methods import run_methods
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.methods.registry import METHODS, make_methods

EMBEDDER = HashingEmbedder()


@dataclass
class Run:
    """A ModelContext: what building methods needs of a run."""

    settings: Settings
    llm: LLM
    embedder: HashingEmbedder = field(default_factory=lambda: EMBEDDER)
    run_id: str = "test-run"

    @property
    def ledger(self):
        return self.llm.ledger


def reply(body: dict) -> str:
    """Schema-valid JSON for every structured call the methods make, fixed by the request."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    h = int(hashlib.sha256(user.encode()).hexdigest()[:8], 16)
    schema = body.get("response_format", {}).get("schema", {}).get("title", "")
    names = [w.strip("?.,") for w in user.split() if w[:1].isupper()][-3:]
    if schema == "QuestionEntities":
        return json.dumps({"entities": names})
    if schema == "QuestionKeywords":
        return json.dumps({"high_level_keywords": names[:1], "low_level_keywords": names[1:]})
    if schema == "RouteLabel":
        return json.dumps({"label": "fact" if h % 2 else "reasoning"})
    if schema == "MapReply":
        return json.dumps({"points": [{"description": f"point {h % 97}", "score": h % 100}]})
    return f"answer {h % 1000}"


# The kit's own in-memory methods; an upstream system answers one question at a time per method through
# its worker (tests/methods/test_upstream_method.py), and a store's twins need its server
# (tests/retrieval/test_stores_*.py).
KIT_METHODS = [m for m in METHODS if not {"system", "store"} & set(METHODS.entry(m).metadata)]


def test_every_available_method_answers_the_same_at_concurrency_1_and_8(scripted, tmp_path):
    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    chunks = chunk_documents(documents, chunk_size=128, overlap=0)
    entities, relations = extract_nlp_graph(chunks)
    index = embed_index(
        GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations),
        EMBEDDER.embed,
    )
    settings = Settings(retrieval={"entity_source": "llm", "lightrag_keywords": "llm"})
    scripted.default_reply = reply
    answers, ledgers = [], []
    for concurrency in (1, 8):
        llm = make_llm(scripted.base_url, tmp_path / str(concurrency), concurrency=concurrency, max_retries=0)
        methods, _ = make_methods(KIT_METHODS, index, Run(settings, llm), settings.qa)
        answers.append(run_methods(methods, dataset.questions[:6]).drop(columns="latency_s"))
        ledgers.append(llm.ledger.frame())
    # Graph methods list a question's entities with one same request: at concurrency 8 they ask
    # at once, one is sent and the others replay it, but which one is not fixed. So the cache hits
    # are compared in total, everything else answer by answer.
    pd.testing.assert_frame_equal(
        answers[0].drop(columns="cached_calls"), answers[1].drop(columns="cached_calls")
    )
    assert answers[0]["cached_calls"].sum() == answers[1]["cached_calls"].sum() > 0
    assert answers[0]["failure"].eq("").all() and len(set(answers[0]["method"])) > 10
    # the retrievers' own model calls ran too, and each answer counted its own
    assert {"question_entities", "route", "map"} <= set(ledgers[1]["stage"])
    llm_calls = ledgers[1][ledgers[1]["kind"] != "embedding"]
    assert answers[1]["calls"].sum() == len(llm_calls)
    assert answers[1]["prompt_tokens"].sum() == llm_calls["prompt_tokens"].sum()
