"""Request deduplication across processes through the response cache: a claim with a lease
(`ResponseCache.claim`), on both backends.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import cache_claimers
import pytest

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.client import LLM
from ragtrial.llm.ledger import Ledger

SPAWN = multiprocessing.get_context("spawn")  # separate interpreters, as two runs are


def slow_echo(body: dict) -> str:
    time.sleep(0.3)  # long enough for the other process to ask the same while this one is in flight
    return "echo: " + body["messages"][-1]["content"]


@pytest.mark.fault
def test_two_processes_on_one_cache_pay_each_request_once(scripted, cache_location):
    """Two runs with different --outputs on one cache paid 12 calls for 6 requests."""
    scripted.default_reply = slow_echo
    location = str(cache_location)
    ResponseCache(location).close()  # the schema first: the processes race for the claims only
    start, results = SPAWN.Barrier(2), SPAWN.Queue()
    askers = [
        SPAWN.Process(target=cache_claimers.ask, args=(location, scripted.base_url, start, results))
        for _ in range(2)
    ]
    for process in askers:
        process.start()
    replies = [results.get(timeout=180) for _ in askers]
    for process in askers:
        process.join(60)
    assert [p.exitcode for p in askers] == [0, 0]
    asked = [r["body"]["messages"][-1]["content"] for r in scripted.chat_requests()]
    assert sorted(asked) == sorted(cache_claimers.QUESTIONS)  # each request sent once
    texts = [[text for text, _ in one] for one in replies]
    assert texts[0] == texts[1] == [f"echo: {q}" for q in cache_claimers.QUESTIONS]
    # each question answered live in one process and replayed in the other
    assert all(a[1] != b[1] for a, b in zip(*replies, strict=True))
    assert ResponseCache(location).store.read("SELECT COUNT(*) FROM claims")[0][0] == 0  # all released


@pytest.mark.fault
def test_a_claim_whose_holder_was_killed_on_this_machine_ends_at_once(scripted, cache_location):
    scripted.script.append(("sleep", 4))  # the first request is held: its process dies in flight
    location = str(cache_location)
    cache = ResponseCache(location)
    hanger = SPAWN.Process(target=cache_claimers.ask_and_hang, args=(location, scripted.base_url, 60.0))
    hanger.start()
    deadline = time.monotonic() + 60
    while not scripted.chat_requests():
        assert time.monotonic() < deadline, "the claimer never sent its request"
        time.sleep(0.05)
    os.kill(hanger.pid, signal.SIGKILL)
    hanger.join(10)
    assert cache.store.read("SELECT COUNT(*) FROM claims")[0][0] == 1  # its claim, 60 s of lease left
    asked = time.monotonic()
    reply = cache_claimers.llm(location, scripted.base_url, lease_s=60).complete(
        cache_claimers.QUESTIONS[0], stage="t"
    )
    assert reply.text == f"echo: {cache_claimers.QUESTIONS[0]}" and not reply.cached
    assert len(scripted.chat_requests()) == 2  # the dead claimer's, then this one's
    assert time.monotonic() - asked < 10  # not the 60 s lease


@pytest.mark.fault
def test_a_claim_of_another_machine_is_waited_for_until_its_lease_runs_out(scripted, cache_location):
    """A holder this machine cannot see (another host) that stopped renewing: its lease decides."""
    location, lease_s = str(cache_location), 1.5
    model = cache_claimers.llm(location, scripted.base_url, lease_s=60)
    key = model.request_key(cache_claimers.QUESTIONS[0])
    cache = ResponseCache(location)
    cache.store.write(
        lambda conn: conn.execute(
            f"INSERT INTO claims (key, holder, expires_at) VALUES ({cache.store.mark}, {cache.store.mark}, "
            f"{cache.store.mark})",
            (key, "another-machine:4242:0123", time.time() + lease_s),
        )
    )
    asked = time.monotonic()
    reply = model.complete(cache_claimers.QUESTIONS[0], stage="t")
    waited = time.monotonic() - asked
    assert reply.text == f"echo: {cache_claimers.QUESTIONS[0]}" and len(scripted.chat_requests()) == 1
    assert lease_s - 0.3 <= waited < lease_s + 3  # it waited for the lease to run out, not longer


class StoredJustBeforeTheClaim(ResponseCache):
    """A cache on which another holder stores its reply and releases its claim after this process
    read the cache and before it claims the key: the race between the read and the claim.
    """

    def claim(self, key: str) -> bool:
        self.put_completion(key, "scripted", "the other holder's reply", 5, 3)
        return super().claim(key)


@pytest.mark.fault
def test_a_reply_stored_between_the_read_and_the_claim_is_replayed_not_paid_again(scripted, cache_location):
    settings = LLMSettings(
        backend="openai_compatible",
        base_url=scripted.base_url,
        model="scripted",
        fold_system=False,
        timeout_s=30,
    )
    model = LLM(
        settings, StoredJustBeforeTheClaim(str(cache_location)), Ledger("t"), lambda: scripted.base_url
    )
    reply = model.complete(cache_claimers.QUESTIONS[0], stage="t")
    assert (reply.text, reply.cached) == ("the other holder's reply", True)
    assert scripted.chat_requests() == []


def test_a_cache_in_memory_claims_nothing_and_still_pays_a_request_once(scripted):
    """No other process can open an in-memory cache (the simulated judge's), so a call writes no claim
    and starts no lease renewal; a request asked again is replayed, not paid again.
    """
    cache = ResponseCache(":memory:")
    settings = LLMSettings(backend="openai_compatible", base_url=scripted.base_url, model="scripted")
    llm = LLM(settings, cache, Ledger("t"), lambda: scripted.base_url)
    assert cache.claim("k") and cache.claim("k") and cache.held == 0
    first, again = (llm.complete("same", stage="t") for _ in range(2))
    assert first.text == again.text and again.cached and len(scripted.chat_requests()) == 1
    assert cache.held == 0
