"""Keys that left their section, so that an old params file or `--set` fails saying where each
key is set now instead of only calling it unknown. `base.params_error` consults the tables when
validation rejects a key.
"""

from __future__ import annotations

# How methods are built does not depend on the experiment: one `methods` section serves them all.
_METHOD_KEYS = ("graph_method", "global_level", "map_budget", "map_max_tokens", "map_max_points")
_ANSWER_SECTIONS = ("qa", "summarization", "judge", "claims")
# The question-quality code links question entities with the run's retrieval settings.
_LINKING_KEYS = ("entity_max_tokens", "link_threshold", "ngram_max")

# Old dotted key -> its new dotted key.
MOVED_KEYS: dict[str, str] = {
    **{f"{section}.{key}": f"methods.{key}" for section in _ANSWER_SECTIONS for key in _METHOD_KEYS},
    **{f"questions.{key}": f"retrieval.{key}" for key in _LINKING_KEYS},
    # A URL, so that the cache may be a PostgreSQL database: `cache_path: x` is `cache.url: sqlite:///x`.
    "cache_path": "cache.url",
}

# Old dotted key -> why it is gone: sections inherited these without reading them.
REMOVED_KEYS: dict[str, str] = {
    "judge.baseline": "the judge compares pairs of methods (judge.methods, judge.pairs), not a baseline",
    "claims.baseline": "claims compares every pair of conditions (claims.methods), not a baseline",
}
