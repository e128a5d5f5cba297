"""Prompt files shipped as package data.

Format of `prompts/<name>.txt`: header lines `key: value` (at least `version:`; optional
`system:`), a line `---`, then the user-turn template with `$name` placeholders
(string.Template, so JSON braces in few-shot examples need no escaping). The version enters
the cache key: editing a prompt without bumping it would replay stale answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from string import Template


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str
    system: str = ""

    @property
    def tag(self) -> str:
        return f"{self.name}@v{self.version}"

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages for this prompt; a missing placeholder is an error, not an empty string."""
        try:
            user = Template(self.template).substitute({k: str(v) for k, v in values.items()})
        except KeyError as err:
            raise KeyError(f"prompt {self.tag}: no value for placeholder {err}") from None
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": user}]


@cache
def load_prompt(name: str) -> Prompt:
    resource = files("ragtrial") / "prompts" / f"{name}.txt"
    if not resource.is_file():
        raise FileNotFoundError(f"no prompt file ragtrial/prompts/{name}.txt")
    header, sep, body = resource.read_text(encoding="utf-8").partition("\n---\n")
    if not sep:
        raise ValueError(f"ragtrial/prompts/{name}.txt: missing the '---' line after the header")
    fields = dict(line.split(":", 1) for line in header.strip().splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "version" not in fields:
        raise ValueError(f"ragtrial/prompts/{name}.txt: header has no 'version:'")
    return Prompt(
        name=name, version=fields["version"], template=body.strip("\n"), system=fields.get("system", "")
    )
