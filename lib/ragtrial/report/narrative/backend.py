"""What notebook 00 says of its probes: what answered against what was requested, and which probes failed."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ragtrial.report.markdown import escape_markdown


def _probe_verdict(probes: pd.DataFrame, with_failures: bool) -> str:
    """Whether every probe succeeded; else which failed (`with_failures`: and each one's failure)."""
    failed = probes[probes["failure"] != ""]
    if failed.empty:
        return f"All {len(probes)} probes succeeded."
    listed = failed["probe"] + (" — " + failed["failure"].map(escape_markdown) if with_failures else "")
    return f"{len(failed)} of {len(probes)} probe(s) failed: " + "; ".join(listed) + "."


def backend_findings(probes: pd.DataFrame, requested: str, answered: str, prompts: Sequence[str]) -> str:
    """The closing paragraph: what answered (the endpoint's word, `llm.ledger.answered_by`), the
    probes' verdict and the prompt versions used.
    """
    return (
        f"**What answered** (`{requested}` was requested): {escape_markdown(answered)}. "
        f"{_probe_verdict(probes, with_failures=True)} Prompt versions used: {', '.join(prompts) or 'none'}."
    )


def backend_headline(probes: pd.DataFrame, requested: str, answered: str) -> str:
    """The one line of notebook 00 for the index page: what answered, and the probes' verdict."""
    return f"Answered by {answered} ({requested} requested). {_probe_verdict(probes, with_failures=False)}"
