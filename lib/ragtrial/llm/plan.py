"""What a stage will ask the model, before it asks (`ragtrial estimate`): planned requests and the
per-stage plan with the basis of its count.

A stage's count is `exact` when it follows from inputs that exist before any model call (chunks,
settings, the data set's questions), an `upper bound` when model output can only lower it (gleaning
rounds that stop early, one entity listing per question before de-duplication), `projected` when
it depends on model output either way (summaries of descriptions the model wrote, reports of the
communities it induced), and `unknown` when it needs data that is absent and no setting states its
size (a row of 0 calls that says so, never a silent 0). Prompt tokens are `counted` on the real
prompts where the inputs exist, or `projected` from stated sizes where they do not (a judge prompt
needs its answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragtrial.llm.tokens import count_tokens
from ragtrial.prompts import Prompt

BASES = ("exact", "upper bound", "projected", "unknown")
# cl100k tokens a projected question takes, where the questions do not exist yet
QUESTION_TOKENS = 24


@dataclass(frozen=True)
class PlannedRequest:
    """One request built as the stage builds it, not sent: its cache key and what it would cost."""

    stage: str
    key: str
    prompt_tokens: int
    max_tokens: int
    output: str  # "text" | "json" (grammar-constrained; slower on the embedded model)
    cached: bool


@dataclass(frozen=True)
class StagePlan:
    """The calls of one stage: how many, on what basis, their tokens, and how many the cache holds."""

    stage: str
    calls: int
    basis: str  # one of BASES
    prompt_tokens: int
    completion_tokens_max: int
    output: str = "text"
    tokens: str = "counted"  # "counted" | "projected"
    cached: int | None = None  # requests of this stage found in the cache; None: not buildable
    note: str = ""
    method: str = ""  # the ledger's `method` label, where a stage runs per method
    # the ledger stages these calls are recorded under, when not `stage` (length alignment's
    # regenerations are `answer` calls)
    ledger_stages: tuple[str, ...] = ()
    # the cache keys of the requests the cache does not hold yet (counted stages only): a request
    # that an earlier run of the batch makes is a cache hit by the time this one asks it
    uncached_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"stage {self.stage!r}: basis {self.basis!r} is not one of {BASES}")


def counted(
    stage: str,
    requests: Sequence[PlannedRequest],
    basis: str = "exact",
    output: str | None = None,
    note: str = "",
) -> StagePlan:
    """The plan of a stage whose every request could be built: tokens counted, cache looked up."""
    return StagePlan(
        stage=stage,
        calls=len(requests),
        basis=basis,
        prompt_tokens=sum(r.prompt_tokens for r in requests),
        completion_tokens_max=sum(r.max_tokens for r in requests),
        output=output or (requests[0].output if requests else "text"),
        tokens="counted",
        cached=sum(r.cached for r in requests),
        note=note,
        uncached_keys=tuple(r.key for r in requests if not r.cached),
    )


def projected(
    stage: str,
    calls: int,
    prompt_tokens: int,
    max_tokens: int,
    basis: str,
    output: str = "text",
    note: str = "",
    method: str = "",
    ledger_stages: tuple[str, ...] = (),
) -> StagePlan:
    """The plan of a stage whose requests need model output (or absent data) to be built: `calls`
    calls of `prompt_tokens` in all (projected from stated sizes) and `max_tokens` each; the cache is
    not consulted.
    """
    return StagePlan(
        stage=stage,
        calls=calls,
        basis=basis,
        prompt_tokens=prompt_tokens,
        completion_tokens_max=calls * max_tokens,
        output=output,
        tokens="projected",
        note=note,
        method=method,
        ledger_stages=ledger_stages,
    )


def unknown(stage: str, note: str) -> StagePlan:
    """A stage whose calls cannot be counted or projected (its data is absent and no setting states
    its size): 0 calls on the `unknown` basis, with the reason.
    """
    return StagePlan(
        stage=stage,
        calls=0,
        basis="unknown",
        prompt_tokens=0,
        completion_tokens_max=0,
        tokens="projected",
        note=note,
    )


def frame_tokens(prompt: Prompt, **known: object) -> int:
    """cl100k tokens of `prompt` rendered with the `known` values and every other placeholder empty:
    the fixed part of a prompt whose variable parts are projected.
    """
    values = {name: "" for name in prompt.placeholders} | known
    return count_tokens("\n".join(m["content"] for m in prompt.render(**values)))
