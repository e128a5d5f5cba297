"""The backend check: which model answered, a completion, a structured call, embeddings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import BaseModel

from ragtrial.config.llm import BackendCheckSettings
from ragtrial.llm.client import LLM
from ragtrial.llm.context import ModelContext
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import StagePlan, counted
from ragtrial.prompts import Prompt, load_prompt

LLM_PROBES = ("completion", "structured")


class CapitalAnswer(BaseModel):
    city: str
    continent: str


@dataclass(frozen=True)
class Probe:
    """One LLM probe: what the report shows as asked, and the request it sends."""

    name: str
    question: str
    messages: str | list[dict[str, str]]
    schema: type[BaseModel] | None
    prompt: Prompt | None
    max_tokens: int

    def ask(self, llm: LLM) -> str:
        """The reply's text (a structured reply as its JSON)."""
        if self.schema is None:
            return llm.complete(
                self.messages, stage="backend_check", method=self.name, max_tokens=self.max_tokens
            ).text
        return llm.structured(
            self.messages,
            self.schema,
            stage="backend_check",
            method=self.name,
            prompt=self.prompt,
            max_tokens=self.max_tokens,
        ).model_dump_json()


def llm_probes(cfg: BackendCheckSettings) -> list[Probe]:
    """The completion and structured probes, in `LLM_PROBES` order: run and planned from here."""
    structured, country = load_prompt("backend_check_structured"), "Japan"
    return [
        Probe("completion", cfg.sample_prompt, cfg.sample_prompt, None, None, cfg.completion_max_tokens),
        Probe(
            "structured",
            country,
            structured.render(country=country),
            CapitalAnswer,
            structured,
            cfg.structured_max_tokens,
        ),
    ]


class BackendCheckError(RuntimeError):
    """No model answered the backend check's probes: the run must fail, not report success."""


def run_backend_check(ctx: ModelContext) -> pd.DataFrame:
    """One row per probe, with what came back or the recorded failure, and the model that answered
    (the `model` the endpoint reported; from the cache for a replayed call).
    """
    cfg = ctx.settings.backend_check
    rows: list[tuple[str, str, str, str, int | None, int | None, bool | None, str]] = []

    for probe in llm_probes(cfg):
        # the probe's own ledger row, whatever else the run's threads are recording meanwhile
        with ctx.ledger.tally() as tally:
            try:
                output = probe.ask(ctx.llm)
            except LLMError as err:
                rows.append(
                    (probe.name, probe.question, "", f"{err.kind}: {err}", None, None, None, err.served_model)
                )
                continue
        (call,) = tally.rows
        rows.append(
            (
                probe.name,
                probe.question,
                output,
                "",
                call.prompt_tokens,
                call.completion_tokens,
                call.cached,
                call.served_model,
            )
        )
    texts = [
        "A knowledge graph links entities by relations.",
        "Graphs connect entities through edges.",
        "The recipe needs two eggs and flour.",
    ]
    with ctx.ledger.tally() as embedding_call:
        vectors = ctx.embedder.embed(texts, stage="backend_check", method="embedding")
    sims = vectors @ vectors.T
    rows.append(
        (
            "embedding",
            " | ".join(texts),
            f"dimension {vectors.shape[1]}; cosine(related)={sims[0, 1]:.3f}, "
            f"cosine(unrelated)={sims[0, 2]:.3f}",
            "",
            None,
            None,
            None,
            embedding_call.rows[0].served_model,
        )
    )
    if not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4):
        raise AssertionError("embeddings are not L2-normalized")
    return pd.DataFrame(
        rows,
        columns=[
            "probe",
            "input",
            "output",
            "failure",
            "prompt_tokens",
            "completion_tokens",
            "cached",
            "served_model",
        ],
    )


def require_an_answer(probes: pd.DataFrame) -> None:
    """Raise BackendCheckError, listing every failure, when no LLM probe got an answer."""
    llm = probes[probes["probe"].isin(LLM_PROBES)]
    if (llm["failure"] != "").all():
        failures = "; ".join(llm["probe"] + ": " + llm["failure"])
        raise BackendCheckError(f"backend check failed, no model answered: {failures}")


def planned_calls(llm: LLM, cfg: BackendCheckSettings) -> list[StagePlan]:
    """The two probes' requests as `run_backend_check` sends them (exact; none sent)."""
    return [
        counted(
            "backend_check",
            [
                llm.plan(
                    probe.messages,
                    probe.schema,
                    stage="backend_check",
                    prompt=probe.prompt,
                    max_tokens=probe.max_tokens,
                )
                for probe in llm_probes(cfg)
            ],
        )
    ]
