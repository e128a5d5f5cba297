"""Settings of claim-based comprehensiveness and diversity (notebook 08)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragtrial.config.base import ExistingPath, conflict
from ragtrial.config.methods import AnswerSettings, FamilyWiseLevel, MethodNames, QuestionsPerType


class ClaimsSettings(AnswerSettings, FamilyWiseLevel):
    """Claim-based comprehensiveness and diversity (ragtrial.evaluation.claims; notebook 08, the
    GraphRAG paper's Experiment 2): `methods` are the conditions ("naive_rag" is the paper's SS),
    answering long-form, as the paper's global questions get. Defaults fit the embedded model's
    3-minute budget; the paper's set (C0-C3, TS, SS on the podcast's 125 global questions) is in
    params/paper_claims.yaml.
    """

    methods: MethodNames = ["global_search_c0", "naive_rag"]
    question_source: Literal["persona", "dataset"] = Field(
        "persona",
        description="\"persona\": GraphRAG's Algorithm 1 with the `questions` settings (the data set's "
        'questions when it yields none); "dataset": the data set\'s own questions, a seeded sample of '
        "questions_per_type per type",
    )
    questions_per_type: QuestionsPerType = 1
    n_questions: int | None = Field(4, ge=1, description="the first n questions; None: all")
    extraction_max_tokens: int = Field(120, gt=0, description="reply token cap of each claim extraction")
    max_claims: int | None = Field(
        6, ge=1, description="maxItems of the claim extraction reply; answers at the cap are counted"
    )
    thresholds: list[Annotated[float, Field(gt=0, le=1)]] = Field(
        [0.5, 0.6, 0.7, 0.8],
        min_length=1,
        description="diversity's distance thresholds on 1 - ROUGE-L F1, each in (0, 1]",
    )
    use_stemmer: bool = Field(False, description="stem words for ROUGE-L (False: rouge-score's default)")
    judge: Literal["classic", "file", "none"] = Field(
        "classic",
        description='judge verdicts to check the claim-based winners against: "classic" runs the classic '
        'protocol here (one vote per position shown), "file" reads `verdicts_path`, "none" skips',
    )
    judge_positions: list[Literal["AB", "BA"]] = Field(
        ["AB", "BA"],
        min_length=1,
        description="judge classic: the orders shown (max_tokens and temperature are the `judge` settings)",
    )
    verdicts_path: Annotated[str | None, ExistingPath("file")] = Field(
        None,
        description="judge file: a table with columns trial, question_id, method_a, method_b, aspect, "
        "outcome (win/tie/loss of method_a); required then",
    )

    @model_validator(mode="after")
    def _verdicts_named(self) -> ClaimsSettings:
        if self.judge == "file" and not self.verdicts_path:
            raise conflict("verdicts_path", "required when judge is file")
        return self
