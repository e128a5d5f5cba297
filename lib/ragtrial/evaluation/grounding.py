"""Answer grounding (seed 004): the share of an answer's factual claims that its retrieved context
supports, so an answer that bypassed the context (parametric knowledge, invention) shows.

Two ways, chosen by `diagnostics.grounding`:
- `entity_grounding`, LLM-free: an answer's claims are the names (the NLP graph's proper-noun finder,
  `index.phrases`) and years it states; a claim is supported when it occurs, normalized as the index
  merges names (`index.merge_extractions.normalize_name`), in the context the answer was given.
- `model_grounding`: the answer's claims come from the kit's claim extraction (`evaluation.claims`),
  and the model checks each against the context with the rubric `check_support` (supported 1,
  partially supported 0.5, not supported 0; the share is their mean over the claims checked).

Frames: answers (question_id, method, text, failure, context_text) -> one row per answer
(question_id, method, grounding_claims, grounding_supported, grounding, grounding_status, ...). A share
is only given for status "ok"; "no claims", "declined", "no answer", "no context" and "failed" rows are
counted and never scored. A support check that fails (after the client's repair round) is counted in
`checks_failed` and its claim is not scored; an answer whose every check failed is "failed".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel

from ragtrial.evaluation.answer_metrics import is_declined, strip_citations
from ragtrial.evaluation.claims import distinct_claims, extract_claims
from ragtrial.evaluation.claims import planned_calls as planned_extractions
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.phrases import lower_case_vocabulary, noun_phrases, sentences
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import StagePlan, frame_tokens, projected, unknown
from ragtrial.prompts import load_prompt
from ragtrial.retrieval.packing import EMPTY_CONTEXT
from ragtrial.text import occurs_as_words

if TYPE_CHECKING:
    from ragtrial.config.settings import Settings
    from ragtrial.llm.client import LLM

CLAIMS_STAGE, CHECK_STAGE = "grounding_claims", "grounding_check"
CHECK_PROMPT = "check_support"
OK, NO_CLAIMS, DECLINED, NO_ANSWER, NO_CONTEXT, FAILED = (
    "ok",
    "no claims",
    "declined",
    "no answer",
    "no context",
    "failed",
)
# What a verdict of the support rubric is worth (stated in the prompt file's header too).
VERDICT_SCORE = {"supported": 1.0, "partially_supported": 0.5, "not_supported": 0.0}
ENTITY_COLUMNS = [
    "question_id",
    "method",
    "grounding_claims",
    "grounding_supported",
    "grounding",
    "grounding_status",
    "unsupported_claims",
]
MODEL_COLUMNS = [
    "question_id",
    "method",
    "grounding_claims",
    "checks_failed",
    "grounding_supported",
    "grounding",
    "grounding_status",
    "verdicts",
]
FAILURE_COLUMNS = ["question_id", "method", "stage", "claim", "kind", "detail"]
# A capitalised answer word that states no name (a yes/no question's answer).
_NOT_NAMES = frozenset({"yes", "no"})
# A year as the generated corpus and most news text write it.
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")


class SupportVerdict(BaseModel):
    """The reply of one support check: the rubric's verdict, then a short reason."""

    verdict: Literal["supported", "partially_supported", "not_supported"]
    reason: str


def answer_text(row: dict[str, Any]) -> str:
    """The answer's text without its `[n]` citation markers; "" when the method produced no answer
    (a recorded failure or no text).
    """
    failure, text = (
        value if isinstance(value, str) else "" for value in (row.get("failure"), row.get("text"))
    )
    return "" if failure else strip_citations(text)


def context_of(row: dict[str, Any]) -> str:
    """The numbered context the answer was given; "" when it had none."""
    context = row.get("context_text")
    return "" if not isinstance(context, str) or context.strip() in ("", EMPTY_CONTEXT) else context


def _status_before_claims(row: dict[str, Any]) -> str:
    """The status an answer has before any claim is looked at ("" when its claims decide)."""
    text = answer_text(row)
    if not text:
        return NO_ANSWER
    if is_declined(text):
        return DECLINED
    return "" if context_of(row) else NO_CONTEXT


def entity_claims(text: str, vocabulary_texts: list[str]) -> list[str]:
    """The names and years `text` states, each once (first surface kept), in order. Names are the
    NLP graph's proper nouns; `vocabulary_texts` (with `text`) tell a clause-initial common word from a
    name, as the corpus does for the index.
    """
    vocabulary = lower_case_vocabulary([text, *vocabulary_texts])
    found = [name for sentence in sentences(text) for name, _ in noun_phrases(sentence, vocabulary)]
    found += _YEAR.findall(text)
    claims: dict[str, str] = {}
    for surface in found:
        key = normalize_name(surface)
        if key and key not in _NOT_NAMES:
            claims.setdefault(key, surface)
    return list(claims.values())


def entity_grounding(answers: pd.DataFrame) -> pd.DataFrame:
    """Per answer, LLM-free: its names and years (`entity_claims`, citation markers stripped), how many
    occur in its context, and their share (status "ok" only). No model call.
    """
    rows = []
    for r in answers.to_dict("records"):
        row = {"question_id": r["question_id"], "method": r["method"]}
        status = _status_before_claims(r)
        if status:
            rows.append(row | {"grounding_status": status, "unsupported_claims": []})
            continue
        context = normalize_name(context_of(r))
        claims = entity_claims(answer_text(r), [context_of(r)])
        unsupported = [c for c in claims if not occurs_as_words(normalize_name(c), context)]
        supported = len(claims) - len(unsupported)
        rows.append(
            row
            | {
                "grounding_claims": len(claims),
                "grounding_supported": supported,
                "grounding": supported / len(claims) if claims else float("nan"),
                "grounding_status": OK if claims else NO_CLAIMS,
                "unsupported_claims": unsupported,
            }
        )
    frame = pd.DataFrame(rows, columns=ENTITY_COLUMNS)
    return frame.astype({"grounding_claims": "Int64", "grounding_supported": "Int64", "grounding": float})


def model_grounding(answers: pd.DataFrame, llm: LLM, settings: Settings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per answer: its claims (the kit's claim extraction, stage "grounding_claims"), each checked
    against the answer's context by the model (`check_support`, stage "grounding_check", one fan-out
    unit per answer, its claims in order), and the supported share of the claims checked (partially
    supported counts 0.5). Returns the grounding frame and the failures (question_id, method, stage,
    claim, kind, detail): failed extractions and failed checks, each counted and never scored.
    """
    cfg = settings.diagnostics
    records = answers.to_dict("records")
    statuses = [_status_before_claims(r) for r in records]
    to_extract = [r for r, status in zip(records, statuses, strict=True) if not status]
    claim_sets = extract_claims(
        # the claims of the answer's words, not of its citation markers
        pd.DataFrame(to_extract, columns=answers.columns).assign(text=[answer_text(r) for r in to_extract]),
        llm,
        max_tokens=cfg.grounding_claims_max_tokens,
        max_claims=cfg.grounding_max_claims,
        stage=CLAIMS_STAGE,
    ).to_dict("records")
    prompt = load_prompt(CHECK_PROMPT)

    def check(unit: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        r, claim_set = unit
        row = {"question_id": r["question_id"], "method": r["method"]}
        if claim_set["status"] != OK:
            kind, _, detail = claim_set["error"].partition(": ")
            failure = {**row, "stage": CLAIMS_STAGE, "claim": "", "kind": kind, "detail": detail}
            return row | {"grounding_status": FAILED, "verdicts": []}, [failure]
        # a fact stated twice is checked (and weighs) once
        claims = distinct_claims(claim_set["claims"])
        if not claims:
            return row | {"grounding_claims": 0, "grounding_status": NO_CLAIMS, "verdicts": []}, []
        verdicts, failures = [], []
        for claim in claims:
            try:
                reply = llm.structured(
                    prompt.render(context=context_of(r), claim=claim),
                    SupportVerdict,
                    stage=CHECK_STAGE,
                    method=r["method"],
                    prompt=prompt,
                    max_tokens=cfg.check_max_tokens,
                )
            except LLMError as err:
                failures.append(
                    {**row, "stage": CHECK_STAGE, "claim": claim, "kind": err.kind, "detail": str(err)}
                )
                continue
            verdicts.append({"claim": claim, "verdict": reply.verdict, "reason": reply.reason})
        score = sum(VERDICT_SCORE[v["verdict"]] for v in verdicts)
        return row | {
            "grounding_claims": len(claims),
            "checks_failed": len(failures),
            "grounding_supported": score,
            "grounding": score / len(verdicts) if verdicts else float("nan"),
            "grounding_status": OK if verdicts else FAILED,
            "verdicts": verdicts,
        }, failures

    checked = iter(llm.fan_out(check, list(zip(to_extract, claim_sets, strict=True)), label=CHECK_STAGE))
    rows, failures = [], []
    for r, status in zip(records, statuses, strict=True):
        if status:
            rows.append({"question_id": r["question_id"], "method": r["method"], "grounding_status": status})
            continue
        row, failed = next(checked)
        rows.append(row)
        failures += failed
    frame = pd.DataFrame(rows, columns=MODEL_COLUMNS)
    frame["verdicts"] = [v if isinstance(v, list) else [] for v in frame["verdicts"]]
    frame = frame.astype(
        {
            "grounding_claims": "Int64",
            "checks_failed": "Int64",
            "grounding_supported": float,
            "grounding": float,
        }
    )
    return frame, pd.DataFrame(failures, columns=FAILURE_COLUMNS)


def answer_grounding(
    answers: pd.DataFrame, llm: LLM, settings: Settings
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Grounding as `diagnostics.grounding` says: "entities" (no model call, no failures), "model", or
    "none" (an empty frame: the caller reports grounding unavailable).
    """
    method = settings.diagnostics.grounding
    if method == "model":
        return model_grounding(answers, llm, settings)
    no_failures = pd.DataFrame(columns=FAILURE_COLUMNS)
    if method == "entities":
        return entity_grounding(answers), no_failures
    return pd.DataFrame(columns=ENTITY_COLUMNS), no_failures


def planned_grounding(n_answers: int, settings: Settings) -> list[StagePlan]:
    """The calls of `answer_grounding` before the answers exist (`ragtrial estimate`): none unless
    `diagnostics.grounding` is "model"; then one claim extraction per answer and one check per claim,
    upper bounds (a failed, declined or context-less answer has none) with `grounding_max_claims`
    claims per answer; prompts projected with answers of `answer_max_tokens` and a full context.
    """
    cfg = settings.diagnostics
    if cfg.grounding != "model":
        return []
    extraction = planned_extractions(
        n_answers, cfg.answer_max_tokens, cfg.grounding_claims_max_tokens, CLAIMS_STAGE
    )
    if cfg.grounding_max_claims is None:
        return [*extraction, unknown(CHECK_STAGE, "one per extracted claim; grounding_max_claims = None")]
    checks = n_answers * cfg.grounding_max_claims
    return [
        *extraction,
        projected(
            CHECK_STAGE,
            checks,
            checks * (frame_tokens(load_prompt(CHECK_PROMPT)) + cfg.context_budget + cfg.answer_max_tokens),
            cfg.check_max_tokens,
            "upper bound",
            "json",
            "one per extracted claim, at most grounding_max_claims per answer",
        ),
    ]
