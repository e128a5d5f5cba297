import pandas as pd

from ragtrial.llm.ledger import (
    LEDGER_COLUMNS,
    CallRecord,
    Ledger,
    by_stage,
    read_ledger,
    summarize,
    throughput_table,
)


def rec(**kw):
    base = dict(
        run_id="r",
        kind="completion",
        stage="s",
        method="m",
        model="x",
        prompt="",
        replicate=0,
        cached=False,
        prompt_tokens=10,
        completion_tokens=5,
        latency_s=1.0,
        attempts=1,
        failure="",
    )
    base.update(kw)
    return CallRecord(**base)


def test_summary_arithmetic(tmp_path):
    ledger = Ledger("r", tmp_path / "ledger.csv")
    ledger.record(rec())
    ledger.record(rec(cached=True, prompt_tokens=7, completion_tokens=2, attempts=0, latency_s=0.001))
    ledger.record(rec(failure="parse", prompt_tokens=4, completion_tokens=1, attempts=2))
    ledger.record(rec(kind="embedding", prompt_tokens=100, completion_tokens=0))
    s = summarize(read_ledger(tmp_path / "ledger.csv"))
    assert s["llm_calls_live"] == 2 and s["llm_calls_cached"] == 1 and s["failures"] == 1
    assert s["prompt_tokens"] == 21 and s["completion_tokens"] == 8
    assert s["live_prompt_tokens"] == 14 and s["live_completion_tokens"] == 6
    assert s["embedding_calls"] == 1
    assert summarize(ledger.frame()) == s  # the CSV round trip loses nothing


def test_by_stage_and_throughput():
    df = pd.DataFrame(
        [vars(rec(stage="a")), vars(rec(stage="a", cached=True)), vars(rec(stage="b"))],
        columns=LEDGER_COLUMNS,
    )
    table = by_stage(df).set_index("stage")
    assert table.loc["a", "calls"] == 2 and table.loc["a", "cached"] == 1 and table.loc["b", "calls"] == 1
    rate = throughput_table(df).set_index("tokens")
    assert rate.loc["generated", "tokens_per_s"] == 10 / 2.0  # two live calls, 5 tokens each, 1 s each
    assert rate.loc["generated", "seconds"] == 2.0
    assert throughput_table(df[df["cached"]]).empty  # replayed from the cache: nothing measured


def test_a_tally_holds_exactly_the_calls_of_its_own_unit_of_work_under_concurrency():
    import threading

    ledger = Ledger("r")
    tallies = {}
    start = threading.Barrier(4)

    def unit(name: str) -> None:
        with ledger.tally() as tally:
            start.wait()  # all four units record at once, interleaved
            for i in range(50):
                ledger.record(rec(method=name, replicate=i))
        tallies[name] = tally

    threads = [threading.Thread(target=unit, args=(f"m{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ledger.frame()) == 200
    for name, tally in tallies.items():
        assert [r.method for r in tally.rows] == [name] * 50
        assert [r.replicate for r in tally.rows] == list(range(50))


def test_nested_tallies_both_see_the_inner_calls_and_other_ledgers_are_not_counted():
    ledger, other = Ledger("r"), Ledger("o")
    with ledger.tally() as outer:
        ledger.record(rec(stage="a"))
        with ledger.tally() as inner:
            ledger.record(rec(stage="b"))
            other.record(rec(stage="elsewhere"))
    ledger.record(rec(stage="after"))
    assert [r.stage for r in outer.rows] == ["a", "b"]
    assert [r.stage for r in inner.rows] == ["b"]
    assert list(inner.frame().columns) == LEDGER_COLUMNS


def test_calls_tallied_apart_count_where_they_are_adopted_not_where_they_were_made():
    ledger = Ledger("r")
    with ledger.tally() as outer:
        with ledger.tally_apart() as apart:
            ledger.record(rec(stage="ahead"))
        ledger.record(rec(stage="here"))
        assert [r.stage for r in outer.rows] == ["here"] and [r.stage for r in apart.rows] == ["ahead"]
        with ledger.tally() as joining:
            ledger.adopt(apart)
        assert [r.stage for r in joining.rows] == ["ahead"]
    assert [r.stage for r in outer.rows] == ["here", "ahead"]  # counted once, where adopted
    assert len(ledger.frame()) == 2  # kept once, when recorded
