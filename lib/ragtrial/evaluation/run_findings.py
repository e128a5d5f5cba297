"""Findings on the run's settings that several notebooks' prose states: how long the answers may be
(the answer prompts' own length rule and the reply token cap), each a `findings` row with source
`run.json` (a prompt's rule is the text of the prompt the settings name); and the confidence level of
the intervals the prose states. Whether the embedded model answered is `findings.embedded_model_finding`.
"""

from __future__ import annotations

import math
import re

from ragtrial.config.methods import AnswerSettings
from ragtrial.evaluation.findings import Finding
from ragtrial.prompts import load_prompt

# The confidence level of the kit's intervals (the `confidence` default of `ragtrial.stats`' and
# `summarize_studies`' intervals), which the prose states.
INTERVAL_LEVEL = 0.95
# Seed 000's methods answered without a length limit, in about this many tokens.
SEED_ANSWER_TOKENS = 200


def answer_length_findings(settings: AnswerSettings) -> list[Finding]:
    """Per answer prompt (answer, then reduce, once each; subject its tag): the length rule it states
    (figure; "" for none) and the words it allows (NaN without a number); the reply token cap; Seed
    000's answer length without a limit, which a capped run's prose compares it with.
    """
    rows = []
    for name in dict.fromkeys([settings.answer_prompt, settings.reduce_prompt]):
        prompt = load_prompt(name)
        words = re.search(r"\d+", prompt.length_rule)
        rows.append(
            Finding(
                "answer_length_rule",
                prompt.length_rule.strip("()"),
                float(words.group()) if words else math.nan,
                "run.json",
                subject=prompt.tag,
            )
        )
    return [
        *rows,
        Finding("answer_max_tokens", "reply token cap of an answer", settings.answer_max_tokens, "run.json"),
        Finding(
            "seed_answer_tokens",
            "Seed 000's answer length without a limit, in tokens",
            SEED_ANSWER_TOKENS,
            "seed 000",
        ),
    ]


def interval_level_finding() -> Finding:
    """The confidence level of the intervals the prose states ("95% interval")."""
    return Finding("interval_level", "confidence level of the intervals", INTERVAL_LEVEL, "ragtrial.stats")
