"""fan_out: units concurrently up to the limit, results in input order, each unit's calls its own."""

from __future__ import annotations

import threading

import pytest
from conftest import make_llm

from ragtrial.llm.fanout import Progress, fan_out
from ragtrial.llm.ledger import Ledger


def test_results_come_back_in_input_order_whatever_order_units_finish_in():
    release = {i: threading.Event() for i in range(6)}

    def unit(i: int) -> int:
        if i < 5:
            release[i + 1].set()  # a later unit may finish only after the earlier one started
        release[i].wait(5) if i > 0 else None
        return i * i

    assert fan_out(unit, range(6), concurrency=6) == [0, 1, 4, 9, 16, 25]


def test_units_run_concurrently_up_to_the_limit_and_no_further():
    in_flight = most = 0
    lock = threading.Lock()
    barrier = threading.Barrier(4, timeout=5)  # breaks unless 4 units are running at once

    def unit(i: int) -> int:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        barrier.wait()
        with lock:
            in_flight -= 1
        return i

    assert fan_out(unit, range(12), concurrency=4) == list(range(12))
    assert most == 4


def test_at_concurrency_one_units_run_inline_in_order():
    seen: list[tuple[int, str]] = []
    fan_out(lambda i: seen.append((i, threading.current_thread().name)), range(3), concurrency=1)
    assert seen == [(i, threading.current_thread().name) for i in range(3)]


def test_a_unit_with_prerequisites_starts_once_they_are_done_not_when_every_earlier_unit_is():
    # units 0 and 1 come first; 2 waits for 0 only, 3 for 1 only. Unit 1 stays running until unit 2
    # has started: unit 2 must not wait for it (nor for a "level" of 0 and 1).
    started: list[int] = []
    two_started = threading.Event()

    def unit(i: int) -> int:
        started.append(i)
        if i == 1:
            assert two_started.wait(5), "unit 2 waited for unit 1, which it does not come after"
        if i == 2:
            two_started.set()
        if i == 3:
            assert 1 in finished
        finished.add(i)
        return i * 10

    finished: set[int] = set()
    assert fan_out(unit, range(4), concurrency=4, after=[[], [], [0], [1]]) == [0, 10, 20, 30]
    assert started.index(2) < started.index(3)
    # inline at concurrency 1, in input order, which runs every unit after its prerequisites
    started.clear()
    finished.clear()
    two_started.set()
    assert fan_out(unit, range(4), concurrency=1, after=[[], [], [0], [1]]) == [0, 10, 20, 30]
    assert started == [0, 1, 2, 3]


def test_of_the_ready_units_the_earliest_in_input_order_starts_first():
    # two slots: unit 0 runs alone, then 1, 2 and 3 are ready at once: 1 and 2 take the slots
    order: list[int] = []
    fan_out(order.append, range(4), concurrency=2, after=[[], [0], [0], [0]])
    assert order[0] == 0 and order[3] == 3


def test_a_unit_can_only_come_after_earlier_units():
    with pytest.raises(ValueError, match="only earlier units"):
        fan_out(lambda i: i, range(3), concurrency=2, after=[[], [2], []])
    with pytest.raises(ValueError, match="prerequisites of 2 units"):
        fan_out(lambda i: i, range(3), concurrency=2, after=[[], []])


def test_a_failed_unit_stops_the_units_waiting_for_it_and_is_raised():
    ran: list[int] = []

    def unit(i: int) -> int:
        ran.append(i)
        if i == 0:
            raise ValueError("unit 0")
        return i

    with pytest.raises(ValueError, match="unit 0"):
        fan_out(unit, range(3), concurrency=2, after=[[], [0], [1]])
    assert 2 not in ran


def test_the_earliest_failure_in_input_order_is_raised_after_running_units_finish():
    finished: list[int] = []
    third_running, second_failed = threading.Event(), threading.Event()

    def unit(i: int) -> int:
        if i == 1:
            second_failed.wait(5)
            raise ValueError("unit 1")
        if i == 2:
            third_running.wait(5)
            second_failed.set()
            raise KeyError("unit 2")
        if i == 3:
            third_running.set()
            second_failed.wait(5)
        finished.append(i)
        return i

    with pytest.raises(ValueError, match="unit 1"):
        fan_out(unit, range(4), concurrency=4)
    assert sorted(finished) == [0, 3]  # the unit still running when unit 2 failed was not abandoned


def test_a_tally_inside_a_unit_sees_only_that_units_calls_and_the_stage_tally_sees_all(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path, concurrency=8)

    def unit(i: int) -> tuple[int, int]:
        with llm.ledger.tally() as tally:
            for k in range(i % 3 + 1):
                llm.complete(f"question {i} part {k}", stage="fanout")
        return i, len(tally.rows)

    with llm.ledger.tally() as stage:
        results = llm.fan_out(unit, range(16), label="fanout")
    assert results == [(i, i % 3 + 1) for i in range(16)]
    assert len(stage.rows) == sum(i % 3 + 1 for i in range(16)) == len(llm.ledger.frame())


def test_progress_line_counts_units_and_the_stages_calls(tmp_path):
    ledger = Ledger("r")
    with ledger.tally() as tally:
        progress = Progress("extract", 4, tally)
        progress.advance()
        assert "1/4 done; calls 0 live, 0 cached, 0 failed" in progress.line()
