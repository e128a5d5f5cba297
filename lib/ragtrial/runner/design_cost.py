"""What a judge design costs, as `ragtrial estimate` counts it: the calls notebook 07 would make to judge
one method pair at M trials, N repeats and a question count (its answers, length alignment and the
protocol's judge calls, from `evaluation.judge.estimate.planned_calls`), each stage priced and timed
by the estimate's own per-call figures (`runner.estimate.plan_row`: latency measured in the ledgers
under the outputs folder, else `llm.estimate_latency_s`, else the embedded model's throughput; money
from the price settings, else unknown).
"""

from __future__ import annotations

from pathlib import Path

from ragtrial.config.batch import RunSpec
from ragtrial.config.settings import Settings
from ragtrial.evaluation.calibration.design import Costing
from ragtrial.evaluation.judge.cost_plan import planned_calls
from ragtrial.llm.plan import QUESTION_TOKENS
from ragtrial.runner.batch_estimate import measured_latency, plan_row

COMPARISON = "07_pairwise_method_comparison"
JUDGE_STAGE = {"classic": "judge_classic", "unbiased": "judge_unbiased"}


def judge_design_costing(settings: Settings, outputs: Path) -> Costing:
    """`Costing` of one method pair judged under `settings` (its judge, model and prices): the protocol's
    judge calls, and the cost and wall time of everything 07 runs for it (None when unpriced or untimed).
    """
    measured = measured_latency(outputs)

    def cost(protocol: str, trials: int, repeats: int, questions: int) -> dict[str, float | None]:
        judge = settings.judge.model_copy(update={"trials": trials, "repeats": repeats})
        plans = planned_calls(
            judge,
            questions,
            1,
            n_answers=2 * questions,
            question_tokens=QUESTION_TOKENS,
            answer_tokens=judge.answer_max_tokens,
            answer_prompt_tokens=judge.context_budget + 100,  # as notebooks 06 and 07 state it
            classic_positions=1 if protocol == "classic" else 0,
            unbiased=protocol == "unbiased",
        )
        spec = RunSpec(notebook=COMPARISON, settings=settings.model_copy(update={"judge": judge}))
        rows = [plan_row(spec, plan, measured) for plan in plans if plan.calls]
        money = [r["cost"] for r in rows]
        wall = [r["wall_s"] for r in rows]
        return {
            "judge_calls": sum(r["calls"] for r in rows if r["stage"] == JUDGE_STAGE[protocol]),
            "cost": None if None in money else float(sum(money)),
            "wall_s": None if None in wall else float(sum(wall)),
        }

    return cost
