"""The real embedded default: llama.cpp serving Gemma 3 270M, started and stopped by the kit."""

import pytest
from pydantic import BaseModel

from ragtrial.cache import ResponseCache
from ragtrial.config import LLMSettings
from ragtrial.ledger import Ledger
from ragtrial.llm import LLM, StructuredOutputError
from ragtrial.server import EmbeddedServer

pytestmark = pytest.mark.embedded


class Capital(BaseModel):
    city: str
    continent: str


def test_embedded_server_answers_and_stops(tmp_path):
    settings = LLMSettings()
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        done = llm.complete("The capital of France is", stage="t", max_tokens=12)
        assert done.completion_tokens > 0 and done.prompt_tokens > 0 and not done.cached
        try:
            answer = llm.structured("Capital of Japan and its continent, as JSON.", Capital, stage="t",
                                    max_tokens=48)
            assert isinstance(answer.city, str)
        except StructuredOutputError:
            pass  # a weak model may fail twice; the failure must then be in the ledger
        ledger = llm.ledger.frame()
        assert len(ledger) == 2 and ledger.loc[1, "failure"] in ("", "parse")
        process = server.process
    finally:
        server.stop()
    assert process.poll() is not None  # no orphan
