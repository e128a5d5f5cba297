"""Processes that ask one endpoint the same questions through one response cache
(tests/llm/test_cache_claims.py): each has its own LLM, cache connection and ledger, as two runs with
different --outputs, or two machines, have.
"""

from __future__ import annotations

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.client import LLM
from ragtrial.llm.ledger import Ledger

QUESTIONS = [f"question {i}" for i in range(6)]


def llm(location: str, base_url: str, lease_s: float) -> LLM:
    settings = LLMSettings(
        backend="openai_compatible", base_url=base_url, model="scripted", fold_system=False, timeout_s=30
    )
    return LLM(settings, ResponseCache(location, lease_s=lease_s), Ledger("claimer"), lambda: base_url)


def ask(location: str, base_url: str, start, results) -> None:
    """Every question, in order, once `start` lets every process go; (text, cached) per question."""
    model = llm(location, base_url, lease_s=60)
    start.wait()
    results.put([(r.text, r.cached) for r in (model.complete(q, stage="t") for q in QUESTIONS)])


def ask_and_hang(location: str, base_url: str, lease_s: float) -> None:
    """One question to an endpoint that holds it: the process is killed while its call is in flight."""
    llm(location, base_url, lease_s).complete(QUESTIONS[0], stage="t")
