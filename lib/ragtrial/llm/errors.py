"""The failures of a model call, as the ledger records them."""

from __future__ import annotations


class LLMError(RuntimeError):
    """A model call that did not produce a usable result; `kind` is what the ledger records, and
    the counters are what the call consumed before it failed (the metrics middleware records them).
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.attempts = 0
        self.latency_s = 0.0


class StructuredOutputError(LLMError):
    def __init__(self, message: str, raw_text: str):
        super().__init__("parse", message)
        self.raw_text = raw_text
