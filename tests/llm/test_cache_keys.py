import pytest

from ragtrial.llm.cache import CachedReply, ResponseCache, cache_key

BASE = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "temperature": 0.0,
    "top_p": 1.0,
    "seed": 0,
    "max_tokens": 10,
    "response_format": None,
    "prompt_version": "p@v1",
    "replicate": 0,
}


@pytest.mark.parametrize(
    "field,value",
    [
        ("model", "other"),
        ("messages", [{"role": "user", "content": "hi!"}]),
        ("messages", [{"role": "system", "content": "hi"}]),
        ("temperature", 0.7),
        ("top_p", 0.9),
        ("seed", 1),
        ("max_tokens", 11),
        ("response_format", {"type": "json_object"}),
        ("prompt_version", "p@v2"),
        ("replicate", 1),
    ],
)
def test_every_key_field_changes_the_key(field, value):
    assert cache_key({**BASE, field: value}) != cache_key(BASE)


def test_key_is_stable_and_order_independent():
    assert cache_key(BASE) == cache_key(dict(reversed(list(BASE.items()))))


def test_cache_roundtrip_keeps_token_counts(cache_location):
    cache = ResponseCache(cache_location)
    cache.put_completion("k", "m", "text", 12, 3, served_model="m-v2")
    stored = CachedReply("text", 12, 3, "ok", "m-v2")
    assert cache.get_completion("k") == stored
    assert ResponseCache(cache_location).get_completion("k") == stored  # persisted
    assert cache.get_completion("missing") is None
