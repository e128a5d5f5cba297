"""The failures of a model call, as the ledger records them."""

from __future__ import annotations

from collections.abc import Iterable

from ragtrial.redact import redact


class LLMError(RuntimeError):
    """A model call that did not produce a usable result; `kind` is what the ledger records, and
    the counters are what the call consumed before it failed (every attempt's tokens, the true
    attempt count; the metrics middleware records them). `cached` marks a failure replayed from
    the response cache (a deterministic validation failure, paid for once); `served_model` is the
    model that sent the unusable reply, "" when none answered.

    The message is redacted (URL user-info and the values of the `key_envs` variables): an
    endpoint's error body may echo the key it was sent.
    """

    def __init__(self, kind: str, message: str, key_envs: Iterable[str] = ()):
        super().__init__(redact(message, key_envs))
        self.kind = kind
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.attempts = 0
        self.throttled = 0  # attempts refused with a rate limit (429)
        self.latency_s = 0.0
        self.cached = False
        self.served_model = ""

    def __reduce__(self) -> tuple:
        """Pickled with its message and counters (a Ray task returns a failed call's error)."""
        return _restored, (type(self), self.args, self.__dict__)


def _restored(kind: type[LLMError], args: tuple, state: dict) -> LLMError:
    error = kind.__new__(kind)
    RuntimeError.__init__(error, *args)
    error.__dict__.update(state)
    return error


class StructuredOutputError(LLMError):
    """A well-formed reply that does not validate against the schema, after the repair round."""

    def __init__(self, message: str, raw_text: str, key_envs: Iterable[str] = ()):
        super().__init__("parse", message, key_envs)
        self.raw_text = raw_text


class BadReply(Exception):
    """A 200 response that is not a usable reply: `empty_reply` (no or blank content) or
    `malformed_response` (no choices, not JSON, wrong embedding vectors). Transient: the retry
    policy retries it like a server error, and it is never cached. `prompt_tokens` and
    `completion_tokens` are what the response reported it consumed.
    """

    def __init__(self, kind: str, message: str, prompt_tokens: int = 0, completion_tokens: int = 0):
        super().__init__(message)
        self.kind = kind
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
