"""The backend check: which model answered, a completion, a structured call, embeddings."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel

from ragtrial.llm.context import ModelContext
from ragtrial.llm.errors import LLMError
from ragtrial.prompts import load_prompt


class CapitalAnswer(BaseModel):
    city: str
    continent: str


def run_backend_check(ctx: ModelContext) -> pd.DataFrame:
    """One row per probe, with what came back or the recorded failure."""
    cfg = ctx.settings.backend_check
    rows = []
    try:
        done = ctx.llm.complete(
            cfg.sample_prompt,
            stage="backend_check",
            method="completion",
            max_tokens=cfg.completion_max_tokens,
        )
        rows.append(
            (
                "completion",
                cfg.sample_prompt,
                done.text,
                "",
                done.prompt_tokens,
                done.completion_tokens,
                done.cached,
            )
        )
    except LLMError as err:
        rows.append(("completion", cfg.sample_prompt, "", f"{err.kind}: {err}", None, None, None))
    prompt = load_prompt("backend_check_structured")
    try:
        answer = ctx.llm.structured(
            prompt.render(country="Japan"),
            CapitalAnswer,
            stage="backend_check",
            method="structured",
            prompt=prompt,
            max_tokens=cfg.structured_max_tokens,
        )
        call = ctx.ledger.frame().iloc[-1]  # the ledger row of the call just made
        rows.append(
            (
                "structured",
                "Japan",
                answer.model_dump_json(),
                "",
                call["prompt_tokens"],
                call["completion_tokens"],
                call["cached"],
            )
        )
    except LLMError as err:
        rows.append(("structured", "Japan", "", f"{err.kind}: {err}", None, None, None))
    texts = [
        "A knowledge graph links entities by relations.",
        "Graphs connect entities through edges.",
        "The recipe needs two eggs and flour.",
    ]
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
        )
    )
    if not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4):
        raise AssertionError("embeddings are not L2-normalized")
    return pd.DataFrame(
        rows, columns=["probe", "input", "output", "failure", "prompt_tokens", "completion_tokens", "cached"]
    )
