"""The backend check: which model answered, a completion, a structured call, embeddings."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel

from ragtrial.config.llm import BackendCheckSettings
from ragtrial.llm.client import LLM
from ragtrial.llm.context import ModelContext
from ragtrial.llm.errors import LLMError
from ragtrial.llm.ledger import throughput
from ragtrial.llm.plan import StagePlan, counted
from ragtrial.prompts import load_prompt

LLM_PROBES = ("completion", "structured")


class CapitalAnswer(BaseModel):
    city: str
    continent: str


class BackendCheckError(RuntimeError):
    """No model answered the backend check's probes: the run must fail, not report success."""


def run_backend_check(ctx: ModelContext) -> pd.DataFrame:
    """One row per probe, with what came back or the recorded failure, and the model that answered
    (the `model` the endpoint reported; from the cache for a replayed call).
    """
    cfg = ctx.settings.backend_check
    rows = []

    def probe(name: str, question: str, ask) -> None:
        # the probe's own ledger row, whatever else the run's threads are recording meanwhile
        with ctx.ledger.tally() as tally:
            try:
                output = ask()
            except LLMError as err:
                rows.append((name, question, "", f"{err.kind}: {err}", None, None, None, err.served_model))
                return
        (call,) = tally.rows
        rows.append(
            (
                name,
                question,
                output,
                "",
                call.prompt_tokens,
                call.completion_tokens,
                call.cached,
                call.served_model,
            )
        )

    probe(
        "completion",
        cfg.sample_prompt,
        lambda: (
            ctx.llm.complete(
                cfg.sample_prompt,
                stage="backend_check",
                method="completion",
                max_tokens=cfg.completion_max_tokens,
            ).text
        ),
    )
    prompt = load_prompt("backend_check_structured")
    probe(
        "structured",
        "Japan",
        lambda: ctx.llm.structured(
            prompt.render(country="Japan"),
            CapitalAnswer,
            stage="backend_check",
            method="structured",
            prompt=prompt,
            max_tokens=cfg.structured_max_tokens,
        ).model_dump_json(),
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


def throughput_sentence(ledger: pd.DataFrame) -> str:
    """What this run measured of the model's speed, true to where the replies came from."""
    rate = throughput(ledger)
    if rate["completion_tokens_per_s"] is not None:
        return (
            f"Live calls took {rate['live_seconds']:.1f} s: {rate['completion_tokens_per_s']:.1f} "
            f"generated tokens/s, {rate['total_tokens_per_s']:.1f} prompt+generated tokens/s "
            "(wall time per call, prompt processing included)."
        )
    llm = ledger[ledger["kind"] != "embedding"]
    if not llm.empty and llm["cached"].astype(bool).all():
        return "Every call was replayed from the cache, so no throughput was measured in this run."
    return "No live call succeeded, so no throughput was measured in this run."


def planned_calls(llm: LLM, cfg: BackendCheckSettings) -> list[StagePlan]:
    """The two probes' requests as `run_backend_check` builds them (exact; none sent)."""
    prompt = load_prompt("backend_check_structured")
    return [
        counted(
            "backend_check",
            [
                llm.plan(cfg.sample_prompt, stage="backend_check", max_tokens=cfg.completion_max_tokens),
                llm.plan(
                    prompt.render(country="Japan"),
                    CapitalAnswer,
                    stage="backend_check",
                    prompt=prompt,
                    max_tokens=cfg.structured_max_tokens,
                ),
            ],
        )
    ]
