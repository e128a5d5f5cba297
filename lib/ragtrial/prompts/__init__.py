"""Prompt files shipped as package data, grouped by the stage that uses them.

`prompts/<stage>/<name>.txt` (stages: index, query, questions, judge, claims, llm); a prompt is
loaded by its name alone, which is unique across the stages, so its tag (`name@vN`, part of every
cache key) does not depend on the folder it sits in. Format: header lines `key: value` (at least
`version:`; optional `system:`; `length_rule:`, the words of the system line that state an
answer's length, which length alignment removes when it asks for a target length; `wording:` of a
rubric, `paper` when it is the seed paper's own wording, `kit` when the kit wrote it, which the
judge reports state; `note:`, a comment for the reader), a line `---`,
then the user-turn template with `$name` placeholders (string.Template, so JSON braces in few-shot
examples need no escaping). The version enters the cache key: editing a prompt without bumping it
would replay stale answers.

A prompt setting (e.g. `qa.answer_prompt`) is such a name, never a path: there is no user prompts
folder, so a new prompt is a new file here (with its `version:`), reviewed like code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from string import Template

# A rubric's `wording:` header: the seed paper's own words, or the kit's.
WORDINGS = ("", "paper", "kit")


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str
    system: str = ""
    length_rule: str = ""  # the words of `system` stating the answer's length ("" when it states none)
    wording: str = ""  # whose wording a rubric is: "paper" (the seed paper's) or "kit" (the kit's own)

    @property
    def tag(self) -> str:
        return f"{self.name}@v{self.version}"

    @property
    def placeholders(self) -> frozenset[str]:
        """The `$name` placeholders of the template: what `render` needs a value for."""
        return frozenset(Template(self.template).get_identifiers())

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages for this prompt; a missing placeholder is an error, not an empty string."""
        try:
            user = Template(self.template).substitute({k: str(v) for k, v in values.items()})
        except KeyError as err:
            raise KeyError(f"prompt {self.tag}: no value for placeholder {err}") from None
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": user}]


@cache
def prompt_files() -> dict[str, tuple[str, Traversable]]:
    """Every prompt file by name, with its stage folder; a name in two stage folders is an error."""
    found: dict[str, tuple[str, Traversable]] = {}
    for stage in sorted((s for s in files("ragtrial.prompts").iterdir() if s.is_dir()), key=lambda s: s.name):
        for resource in stage.iterdir():
            if resource.name.endswith(".txt"):
                name = resource.name[: -len(".txt")]
                if name in found:
                    raise ValueError(
                        f"prompt {name!r} is in two stage folders: {found[name][0]} and {stage.name}"
                    )
                found[name] = (stage.name, resource)
    return found


@cache
def load_prompt(name: str) -> Prompt:
    """The shipped prompt `name` (see `prompt_files`), its header checked."""
    if name not in prompt_files():
        raise FileNotFoundError(
            f"no prompt named {name!r} (a prompt is named, not a path: a file ragtrial/prompts/<stage>/"
            f"<name>.txt); known: {', '.join(sorted(prompt_files()))}"
        )
    stage, resource = prompt_files()[name]
    where = f"ragtrial/prompts/{stage}/{name}.txt"
    header, sep, body = resource.read_text(encoding="utf-8").partition("\n---\n")
    if not sep:
        raise ValueError(f"{where}: missing the '---' line after the header")
    fields = dict(line.split(":", 1) for line in header.strip().splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "version" not in fields:
        raise ValueError(f"{where}: header has no 'version:'")
    system, length_rule = fields.get("system", ""), fields.get("length_rule", "")
    wording = fields.get("wording", "")
    if wording not in WORDINGS:
        raise ValueError(f"{where}: wording {wording!r} is none of {WORDINGS}")
    if length_rule and f" {length_rule}" not in system:
        raise ValueError(f"{where}: length_rule {length_rule!r} is not words of its system line")
    return Prompt(
        name=name,
        version=fields["version"],
        template=body.strip("\n"),
        system=system,
        length_rule=length_rule,
        wording=wording,
    )
