"""Settings of claim-based comprehensiveness and diversity (notebook 08)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragtrial.config.methods import MethodSettings


class ClaimsSettings(MethodSettings):
    """Claim-based comprehensiveness and diversity (ragtrial.claims; notebook 08, the GraphRAG paper's
    Experiment 2). Defaults fit the embedded model's 3-minute budget; the paper's set (C0-C3, TS, SS
    on the podcast's 125 global questions) is in params/paper_claims.yaml.
    """

    methods: list[str] = ["global_search_c0", "naive_rag"]  # the conditions; "naive_rag" is the paper's SS
    # persona: GraphRAG's Algorithm 1 with the `questions` settings (the data set's questions when it
    # yields none); dataset: the data set's own questions, a seeded sample of questions_per_type per type
    question_source: Literal["persona", "dataset"] = "persona"
    questions_per_type: int | None = Field(1, ge=1)
    n_questions: int | None = Field(4, ge=1)  # the first n questions; None: all
    answer_prompt: str = "summarize_query"  # long-form answers, as the paper's global questions get
    answer_max_tokens: int = Field(96, gt=0)
    first_line_only: bool = False
    reduce_prompt: str = "summarize_query"
    extraction_max_tokens: int = Field(120, gt=0)
    max_claims: int | None = Field(6, ge=1)  # maxItems of the reply; answers at the cap are counted
    thresholds: list[Annotated[float, Field(gt=0, le=1)]] = [0.5, 0.6, 0.7, 0.8]  # on 1 - ROUGE-L F1
    use_stemmer: bool = False  # rouge-score's default tokenization
    # Judge verdicts to check the claim-based winners against: "classic" runs ragtrial.judge's
    # classic protocol here (one vote per position shown), "file" reads `verdicts_path` (columns
    # trial, question_id, method_a, method_b, aspect, outcome = win/tie/loss of method_a), "none" skips.
    judge: Literal["classic", "file", "none"] = "classic"
    judge_positions: list[Literal["AB", "BA"]] = ["AB", "BA"]  # max_tokens, temperature: `judge` settings
    verdicts_path: str | None = None
    alpha: float = Field(0.05, gt=0, lt=1)
