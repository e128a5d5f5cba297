"""Structured output: the JSON object in a reply, validated against a pydantic schema."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ragtrial.llm.errors import LLMError, StructuredOutputError

T = TypeVar("T", bound=BaseModel)
TOO_LONG = "too_long"  # the failure kind of a reply whose only fault is a string over its length cap


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


def short_error(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in err.errors()[:3])


def over_length_cap(schema: type[BaseModel], text: str) -> bool:
    """Whether `text` would validate against `schema` but for strings longer than their maxLength:
    a reply a length cap rejected, not a malformed one.
    """
    try:
        parse_reply(schema, text)
    except ValidationError as err:
        return all(e["type"] == "string_too_long" for e in err.errors())
    return False


def at_length_cap(text: str, max_chars: int | None) -> bool:
    """Whether an accepted text reached its length cap: a grammar-constrained decoder closes the string
    there, so the text may be cut short (counted, never dropped).
    """
    return max_chars is not None and len(text) >= max_chars


def failure_kind(err: LLMError, schema: type[BaseModel]) -> str:
    """The kind a caller records for a failed structured call: `too_long` when the only fault of the
    final reply is a string over its length cap (a setting, so it is counted apart), else the
    error's own kind.
    """
    if isinstance(err, StructuredOutputError) and over_length_cap(schema, err.raw_text):
        return TOO_LONG
    return err.kind
