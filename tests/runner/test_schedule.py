"""Which runs of a batch run at once (`runner.schedule`): the default batch on two threads runs its
runs on the embedded model beside each other (they share the batch's server), never a model-free run
beside another run that computes here, never two runs of one identity, and a notebook that reads the
batch's runs only after every run before it.
"""

from __future__ import annotations

import threading
import time

from conftest import PROJECT_ROOT, batch_runs

from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.runner.schedule import RunQueue, identity_key, machine_lane, run_waits


def test_the_default_batchs_waits_follow_identity_readers_and_the_machines_cores():
    specs = batch_runs("params/default.yaml")
    here, cluster = run_waits(specs, one_machine=True), run_waits(specs, one_machine=False)
    lanes = [machine_lane(s) for s in specs]
    assert set(lanes) == {"no model", "embedded model"}
    for i, spec in enumerate(specs):
        model_free_before = [j for j in range(i) if lanes[j] == "no model"]
        same = [j for j in range(i) if identity_key(specs[j]) == identity_key(spec)]
        if NOTEBOOKS.get(spec.notebook).reads_batch_runs:  # the verdict, calibration, comparison, sweep
            assert here[i] == cluster[i] == set(range(i)), spec.notebook
            continue
        # on a cluster only the run before of its identity; here a model-free run also waits for every
        # earlier run, a run on the embedded model for the model-free run before it
        assert cluster[i] == set(same[-1:]), spec.notebook
        cores = set(range(i)) if lanes[i] == "no model" else set(model_free_before[-1:])
        assert here[i] == set(same[-1:]) | cores, spec.notebook
    # the four real-evidence runs are four data sets: only this machine's cores order them
    free = [i for i, lane in enumerate(lanes) if lane == "no model"]
    assert len(free) == 4 and all(cluster[i] == frozenset() for i in free)
    # the upstream systems' run (Operation Dulce) is an identity of its own: at once on a cluster, here
    # once the last model-free run has ended
    (upstream,) = [i for i, s in enumerate(specs) if s.notebook == "11_upstream_systems"]
    assert cluster[upstream] == frozenset() and here[upstream] == {max(free)}


def test_a_run_queue_hands_out_each_run_once_its_waits_have_ended():
    queue = RunQueue([frozenset(), frozenset({0}), frozenset(), frozenset({1, 2})])
    assert queue.take() == 0
    assert queue.take() == 2  # 1 waits for 0
    taken: list[int | None] = []
    waiter = threading.Thread(target=lambda: taken.append(queue.take()))
    waiter.start()
    time.sleep(0.2)
    assert taken == []  # 1 and 3 both wait
    queue.end(0)
    waiter.join(5)
    assert taken == [1]
    queue.stop()
    assert queue.take() is None  # stopped: 3 is never handed out


def test_the_default_batch_on_two_threads_overlaps_runs_on_the_embedded_model(tmp_path, monkeypatch):
    from ragtrial.runner import batch as batch_module
    from ragtrial.runner.execute import RunResult

    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    specs = batch_runs("params/default.yaml")
    position = {spec.run_id: i for i, spec in enumerate(specs)}

    def execute(spec, root, outputs, on_start=None, **options):
        with lock:
            events.append(("start", position[spec.run_id]))
        time.sleep(0.05)
        with lock:
            events.append(("end", position[spec.run_id]))
        return RunResult(spec.run_id, spec.notebook, "completed", outputs / spec.run_id, {})

    monkeypatch.setattr(batch_module, "execute_run", execute)
    results = batch_module.run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        {},
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        workers=2,
        log=lambda _: None,
    )
    assert [r.run_id for r in results] == [s.run_id for s in specs]
    free = {i for i, s in enumerate(specs) if machine_lane(s) == "no model"}
    model = {i for i, s in enumerate(specs) if machine_lane(s) == "embedded model"}
    running: set[int] = set()
    overlapped_model = False
    for event, i in events:
        if event == "end":
            running.discard(i)
            continue
        spec = specs[i]
        assert not (i in free and running & (free | model)), "a model-free run beside one that computes"
        assert not (i in model and running & free), "a run on the embedded model beside a model-free one"
        assert all(identity_key(specs[j]) != identity_key(spec) for j in running), "one identity twice"
        if NOTEBOOKS.get(spec.notebook).reads_batch_runs:
            ended = {j for e, j in events[: events.index((event, i))] if e == "end"}
            assert set(range(i)) <= ended, spec.notebook
        overlapped_model |= i in model and bool(running & model)
        running.add(i)
    assert overlapped_model
