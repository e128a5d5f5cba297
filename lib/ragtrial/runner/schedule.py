"""Which runs of a batch may run at once, for both engines (`runner.batch`'s threads, `runner.ray_engine`).

A run starts after the earlier runs it depends on (`run_waits`), each for a reason of its own:
- the run before it of its identity (data set, model and index: `runner.combined_runs.identity`): the
  first builds the index the others read, a reply one run paid is in the cache before the next asks
  for it, and each sees the tables of the runs before it, as one worker running the batch in order;
- every earlier run, for a notebook that reads the result tables of its batch's other runs
  (`NotebookSpec.reads_batch_runs`: the verdict, the calibration, the comparison, the sweep);
- on one machine, for the cores (`machine_lane`): a run that calls no model
  (`NotebookSpec.real_evidence`: embeddings and graphs, torch computing on every core) runs alone among
  the runs that compute here, so it waits for every earlier one of them, and a run on the embedded
  model waits for the model-free run before it. Runs on the embedded model may run beside each other:
  they send their calls to the one server the batch shares (`runner.batch.BatchServers`), so together
  they fill its slots where one run alone leaves some idle. A model-free run beside the model's was
  measured slower (torch's threads and the server's split the cores, docs/design.md).
Every wait is on an earlier run, so a batch picked in order never deadlocks; one worker runs the
batch in its order, as before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from ragtrial.config.batch import RunSpec
from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.runner.combined_runs import identity


def identity_key(spec: RunSpec) -> str:
    """The runs that share an index, cached replies or each other's tables: one identity."""
    return json.dumps(identity(spec.settings.model_dump(mode="json")), sort_keys=True, default=str)


def machine_lane(spec: RunSpec) -> str:
    """How a run computes on this machine's cores: "no model" (torch on every core), "embedded model"
    (the batch's shared server), "" neither (e.g. a run against an endpoint elsewhere).
    """
    # a notebook outside the registry (a project's own) may call the model
    if spec.notebook in NOTEBOOKS and NOTEBOOKS.get(spec.notebook).real_evidence:
        return "no model"
    return "embedded model" if spec.settings.llm.backend == "embedded" else ""


def run_waits(specs: Sequence[RunSpec], one_machine: bool) -> list[frozenset[int]]:
    """For each run (0-based, batch order) the earlier runs it starts after (see the module's notes);
    `one_machine`: the runs share this machine's cores (the threads engine), not a cluster's.
    """
    waits: list[frozenset[int]] = []
    last_of_identity: dict[str, int] = {}
    computing: list[int] = []  # the earlier runs that compute on this machine's cores
    last_model_free: int | None = None
    for i, spec in enumerate(specs):
        notebook = NOTEBOOKS.get(spec.notebook)
        before: set[int] = set(range(i)) if notebook.reads_batch_runs else set()
        key = identity_key(spec)
        if key in last_of_identity:
            before.add(last_of_identity[key])
        last_of_identity[key] = i
        lane = machine_lane(spec) if one_machine else ""
        if lane == "no model":
            before.update(computing)
            last_model_free = i
        elif lane and last_model_free is not None:
            before.add(last_model_free)
        if lane:
            computing.append(i)
        waits.append(frozenset(before))
    return waits


class RunQueue:
    """The runs of a batch handed to worker threads: `take` gives the first run in batch order whose
    waits have ended (blocking while none has), None when every run is taken or the queue stopped.
    """

    def __init__(self, waits: list[frozenset[int]]):
        self._waits = waits
        self._pending = list(range(len(waits)))
        self._ended: set[int] = set()
        self._stopped = False
        self._changed = threading.Condition()

    def take(self) -> int | None:
        with self._changed:
            while self._pending and not self._stopped:
                for i in self._pending:
                    if self._waits[i] <= self._ended:
                        self._pending.remove(i)
                        return i
                self._changed.wait()
            return None

    def end(self, i: int) -> None:
        with self._changed:
            self._ended.add(i)
            self._changed.notify_all()

    def stop(self) -> None:
        """Take no further run (the batch was interrupted); runs already taken go on to their end."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
