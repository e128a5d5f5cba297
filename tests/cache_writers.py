"""Processes that write and read the same response-cache keys at once (tests/llm/test_shared_cache.py).

Each writer stores every key with rows of its own (its number in the served model, the tokens and
the text), so a reader can tell a whole row of either writer from a torn one.
"""

from __future__ import annotations

import numpy as np

from ragtrial.llm.cache import CachedReply, ResponseCache

KEYS = [f"key-{i:03d}" for i in range(120)]
EMBEDDING_BATCH = 30
EMBEDDING_ROUNDS = 3


def written_reply(key: str, writer: int) -> CachedReply:
    return CachedReply(f"{key} by writer {writer} " * 200, 10 + writer, len(key), "ok", f"writer-{writer}")


def written_vector(key: str, writer: int) -> np.ndarray:
    return np.full(64, float(KEYS.index(key) * 10 + writer), dtype=np.float32)


def write(location: str, writer: int, start) -> None:
    """Every key, writer 1 in reverse order: embeddings first, in overlapping batches of one
    transaction each (taking the same row locks in opposite orders, but for the cache's key order),
    then the completions one by one.
    """
    cache = ResponseCache(location)
    keys = KEYS if writer == 0 else KEYS[::-1]
    start.wait(120)
    for _ in range(EMBEDDING_ROUNDS):
        for first in range(0, len(keys), EMBEDDING_BATCH):
            batch = keys[first : first + 2 * EMBEDDING_BATCH]  # the next batch's keys too
            cache.put_embeddings("emb", [(k, written_vector(k, writer), writer + 1) for k in batch])
    for key in keys:
        reply = written_reply(key, writer)
        cache.put_completion(
            key,
            "m",
            reply.text,
            reply.prompt_tokens,
            reply.completion_tokens,
            served_model=reply.served_model,
        )
    cache.close()


def read(location: str, start, writers_done, results) -> None:
    """Read every key until the writers are done (and once more); report rows seen and torn rows."""
    cache = ResponseCache(location)
    start.wait(120)
    seen, torn = 0, []
    finished = False
    while not finished:
        finished = writers_done.is_set()
        for key in KEYS:
            reply = cache.get_completion(key)
            if reply is not None:
                seen += 1
                writer = int(reply.served_model.removeprefix("writer-"))
                if reply != written_reply(key, writer):
                    torn.append(key)
        for key, (vector, n_tokens) in cache.get_embeddings(KEYS).items():
            if not np.array_equal(vector, written_vector(key, n_tokens - 1)):
                torn.append(f"embedding {key}")
    results.put((seen, torn))
    cache.close()
