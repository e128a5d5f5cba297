"""Settings of the LLM-as-judge protocols (notebooks 06 and 07)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ragtrial.config.base import conflict
from ragtrial.config.methods import AnswerSettings, MethodName, MethodNames, QuestionsPerType


class UnbiasedJudgeSettings(AnswerSettings):
    """What seed 000's unbiased protocol needs (notebooks 07 and 11): the methods and pairs judged,
    the questions, length alignment, M trials x N repeats, the aspects and the judge's sampling.
    """

    methods: MethodNames = ["naive_rag", "local_search"]
    pairs: list[tuple[MethodName, MethodName]] = Field(
        [], description="07: the (a, b) method pairs judged, two different `methods` each; empty: every pair"
    )
    question_source: Literal["dataset", "graph"] = Field(
        "dataset",
        description='"dataset": the data set\'s questions, by question_type; "graph": node/edge/subgraph '
        "questions generated from the index (the `questions` settings), by level",
    )
    questions_per_type: QuestionsPerType = 1
    answer_temperature: float = Field(
        0.7,
        ge=0,
        le=2,
        description="sampling temperature of 06's two runs of the self-vs-self method (they are samples), "
        "of every trial's answers under `trial_scope: answers` and of length alignment's forced append",
    )
    trials: int = Field(
        3,
        ge=1,
        description="M: trials, each a fresh sample of every judge call; `trial_scope` says whether the "
        "answers are written again too",
    )
    trial_scope: Literal["answers", "judge_only"] = Field(
        "judge_only",
        description='what a trial re-runs. "answers" (seed 000, Section IV-B: "the evaluation process is '
        're-executed for each trial"): every answer is written again as a sample of its own (replicate per '
        "trial, at `answer_temperature`), length-aligned again and judged, so the trial spread holds the "
        "answers' randomness and the judge's; \"judge_only\": the answers are written and aligned once and "
        "only the judge is re-sampled per trial (the trial spread is judge noise alone; M times cheaper in "
        "answers and alignment). An imported or an upstream system's answer cannot be sampled again: it "
        "serves every trial either way",
    )
    repeats: int = Field(1, ge=1, description="N: the same prompt issued N times per position")
    aspects: list[Literal["comprehensiveness", "relevance", "empowerment", "directness"]] = Field(
        ["comprehensiveness", "relevance", "empowerment", "directness"],
        min_length=1,
        description="the aspects the unbiased judge scores 0-5, each against its rubric",
    )
    tolerance_words: int = Field(10, ge=0, description="length alignment: the word gap allowed")
    max_regenerations: int = Field(
        2,
        ge=0,
        description="R: regenerations of the shorter answer before the forced append (length alignment)",
    )
    judge_temperature: float = Field(
        0.7,
        gt=0,
        le=2,
        description="sampling temperature of the judge, > 0 so that trials and repeats are real samples",
    )
    judge_max_tokens: int = Field(
        64,
        gt=0,
        description='reply token cap of the unbiased judge: {"answer_1": [scores], "answer_2": [...]}; '
        "room for the JSON pretty-printed, as llama.cpp's schema grammar lets a model write it (48 cut 17 "
        "of 99 embedded replies)",
    )

    @model_validator(mode="after")
    def _pairs_of_methods(self) -> UnbiasedJudgeSettings:
        for a, b in self.pairs:
            if a == b:
                raise conflict("pairs", f"({a}, {b}) pairs a method with itself (06 does that: self_method)")
            if not {a, b} <= set(self.methods):
                raise conflict(
                    "pairs", f"({a}, {b}) names a method not among the methods ({', '.join(self.methods)})"
                )
        return self


class JudgeSettings(UnbiasedJudgeSettings):
    """LLM-as-judge protocols (ragtrial.evaluation.judge; notebooks 06 and 07): 06 compares
    `self_method` with itself, 07 judges every pair of `methods` (or the listed `pairs`). Judged
    answers are long-form, as in both papers. Defaults fit the embedded model's budget (06 about
    4 minutes, 07 about 5); the papers' sizes (M=25 trials, N=2 repeats, 150 questions, five
    methods) are in params/paper_judge.yaml.
    """

    self_method: MethodName = Field(
        "naive_rag", description="06: the method compared with itself (two sampled runs)"
    )
    classic_max_tokens: int = Field(
        48, gt=0, description="reply token cap of the classic judge: a winner per criterion and overall"
    )
    classic_positions: list[Literal["AB", "BA"]] = Field(
        ["AB"],
        min_length=1,
        description="07: the fixed orders the classic judge is run in, each a condition of its own: "
        '"AB" shows method_a (the method under test, listed first) first, as the published protocol does; '
        '["AB", "BA"] also runs B first, so the order flip of seed 000\'s Fig. 2 is measured (06 always '
        "runs both; 08 has claims.judge_positions)",
    )
    classic_repeats: int = Field(
        1,
        ge=1,
        description="the classic judge asks each (order, pair) this many times (the GraphRAG paper: 5, "
        "averaged for the win rate, majority for the claims agreement)",
    )
    classic_ties: bool = Field(
        False,
        description="the classic judge may call a tie (prompt judge_classic_ties, as in the GraphRAG paper); "
        "False: a winner is forced (the protocol as LightRAG and seed 000 ran it)",
    )
    unbiased: bool = Field(
        True,
        description="07: run length alignment and the unbiased protocol beside the classic one; False: the "
        "classic protocol alone (the GraphRAG paper's Experiment 1)",
    )
