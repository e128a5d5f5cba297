"""Wordings several narratives share: a number, an estimate with its interval, and the answers' length limits
from the `findings` rows of `evaluation.run_findings`.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import stated, statements


def plain_number(value: float, digits: int = 3) -> str:
    """A count as a whole number with thousands separators, other values to `digits` significant
    digits: "1,250", "0.417".
    """
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.{digits}g}"


def signed_interval(mean: float, low: float, high: float, digits: int = 2) -> str:
    """A signed estimate and its interval: "+0.25 [+0.10, +0.40]"."""
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def answer_length_sentence(findings: pd.DataFrame) -> str:
    """How long the judged answers may be: each answer prompt's own length rule, if any, and the reply
    token cap (seed 000's methods answered without a length limit); "" when the findings state none.
    """
    prompts = statements(findings, "answer_length_rule")
    if prompts.empty:
        return ""
    rules = [
        f"`{r.subject}` asks for {r.figure}" if r.figure else f"`{r.subject}` sets no length limit"
        for r in prompts.itertuples(index=False)
    ]
    capped = (prompts["figure"] != "").any()
    seed_tokens = stated(findings, "seed_answer_tokens").value
    return (
        "**Answer length**: the answer prompt "
        + "; the reduce prompt ".join(rules)
        + f"; replies stop at {stated(findings, 'answer_max_tokens').value:.0f} tokens."
        + (
            f" Seed 000's methods answered without a length limit (about {seed_tokens:.0f} tokens); this cap "
            "narrows the length differences its headline rests on."
            if capped
            else ""
        )
    )
