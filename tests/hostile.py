"""Hostile model text for the fault suite: injection strings, a scripted-server reply that puts them
in every string of every structured reply, a finder of the live elements they would make, and a
finder of the files under a folder that hold a secret.
"""

from __future__ import annotations

import html.parser
import json
from typing import Any

from ragtrial.report.markdown import escape_markdown

INJECTIONS = ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>", "[link](javascript:alert(3))"]
INJECTION = " ".join(INJECTIONS)


def schema_value(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value valid under a (pydantic) JSON schema whose every string is the injection."""
    if "$ref" in schema:
        return schema_value(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return schema_value(next(s for s in schema["anyOf"] if s.get("type") != "null"), defs)
    if "enum" in schema or "const" in schema:
        return schema.get("enum", [schema.get("const")])[0]
    kind = schema.get("type", "string")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: schema_value(sub, defs) for name, sub in props.items()}
    if kind == "array":
        return [schema_value(schema.get("items", {}), defs)] * max(1, schema.get("minItems", 1))
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    fitting = [text for text in [INJECTION, *INJECTIONS] if len(text) <= schema.get("maxLength", len(text))]
    return fitting[0] if fitting else "x"


def injecting_reply(body: dict[str, Any]) -> str:
    """Every structured reply valid, with the injection in every string; free text is the injection."""
    response_format = body.get("response_format")
    if not response_format:
        return INJECTION
    schema = response_format.get("schema") or response_format["json_schema"]["schema"]
    return json.dumps(schema_value(schema, schema.get("$defs", {})))


class LiveElements(html.parser.HTMLParser):
    """Elements of a page that would run the injected script: an event handler or script body
    naming `alert`, or a javascript: link.
    """

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        for name, value in attrs:
            value = value or ""
            if (name.startswith("on") and "alert" in value) or value.lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and "alert(" in data:
            self.found.append(f"<script>{data.strip()[:60]}")


def live_elements(page: str) -> list[str]:
    parser = LiveElements()
    parser.feed(page)
    return parser.found


def written_forms(secret: str) -> set[str]:
    """The secret as a file may hold it: as is, escaped for Markdown, and inside a JSON string."""
    plain = {secret, escape_markdown(secret)}
    return plain | {json.dumps(form)[1:-1] for form in plain}


def written_secrets(root, secrets_: list[str]) -> dict[str, list[str]]:
    """Every file under `root` (but the batch file) that holds one of `secrets_`, with those it holds."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and path.name != "batch.yaml":
            data = path.read_bytes()
            held = [s for s in secrets_ if any(form.encode() in data for form in written_forms(s))]
            if held:
                found[str(path.relative_to(root))] = held
    return found
