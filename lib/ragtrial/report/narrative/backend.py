"""What notebook 00 says of its probes: what answered against what was requested, which probes
failed, and the throughput this run measured; worded from its saved tables.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.backend_findings import PROBES, PROBES_FAILED
from ragtrial.evaluation.findings import FINDINGS_TABLE, stated_count
from ragtrial.evaluation.run_facts import QUOTED_NAMES_TABLE, quoted_name
from ragtrial.llm.ledger import answered_by_text
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.narration import Narration, SavedTables, saved


def _probe_verdict(probes: pd.DataFrame, findings: pd.DataFrame, with_failures: bool) -> str:
    """Whether every probe succeeded; else which failed (`with_failures`: and each one's failure)."""
    run, failed = (stated_count(findings, s) for s in (PROBES, PROBES_FAILED))
    if not failed:
        return f"All {run} probes succeeded."
    failures = probes[probes["failure"] != ""]
    listed = failures["probe"] + (" — " + failures["failure"].map(escape_markdown) if with_failures else "")
    return f"{failed} of {run} probe(s) failed: " + "; ".join(listed) + "."


def throughput_note(throughput: pd.DataFrame, answered: pd.DataFrame) -> str:
    """What this run measured of the model's speed (tables `throughput`, `answered_by`), true to
    where the replies came from.
    """
    if not throughput.empty:
        rate = throughput.set_index("tokens")["tokens_per_s"]
        return (
            f"Live calls took {throughput['seconds'].iloc[0]:.1f} s: {rate['generated']:.1f} "
            f"generated tokens/s, {rate['prompt+generated']:.1f} prompt+generated tokens/s "
            "(wall time per call, prompt processing included)."
        )
    if list(answered["source"]) == ["replayed"]:
        return "Every call was replayed from the cache, so no throughput was measured in this run."
    return "No live call succeeded, so no throughput was measured in this run."


def narrate(tables: SavedTables) -> Narration:
    """The headline (what answered, the probes' verdict) and the closing paragraph: what answered
    (the endpoint's word, table `answered_by`), the probes' verdict and the prompt versions used.
    """
    probes, findings = saved(tables, "probes"), saved(tables, FINDINGS_TABLE)
    requested = quoted_name(saved(tables, QUOTED_NAMES_TABLE), "llm.model")
    answered = answered_by_text(saved(tables, "answered_by"))
    prompts = list(saved(tables, "prompt_versions")["prompt"])
    return Narration(
        headline=f"Answered by {answered} ({requested} requested). "
        + _probe_verdict(probes, findings, with_failures=False),
        findings=f"**What answered** (`{requested}` was requested): {escape_markdown(answered)}. "
        f"{_probe_verdict(probes, findings, with_failures=True)} Prompt versions used: "
        f"{', '.join(prompts) or 'none'}.",
    )
