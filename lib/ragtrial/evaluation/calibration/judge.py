"""The simulated judge behind the LLM interface: a transport (`LLM(..., transport=...)`) that answers the
kit's judge prompts the way `model.JudgeModel` says, so that `judge_unbiased`, `judge_classic` and their
aggregation run unchanged, through the middleware, cache and ledger, with no network.

It reads a call as a model would: the prompt's question and its two answers, in the order shown
(`judge_score`, `judge_classic`, `judge_classic_ties`, parsed with the prompt files' own templates), the
aspects the scoring prompt lists, and whether ties are allowed. Each answer text is looked up among the
simulated answers (its method and latent quality); its length is the text's own word count. The reply
is deterministic given the judge's seed: a call's noise is drawn from its cache key (the request, seed
and replicate included), a trial's shift from (trial, method).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from ragtrial.config.llm import LLMSettings
from ragtrial.evaluation.calibration.model import (
    CLASSIC_CRITERIA,
    Draws,
    JudgeModel,
    classic_picks,
    criterion_quality,
    rubric_scores,
)
from ragtrial.evaluation.judge.pairs import word_count
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.client import LLM
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.middleware import Call, Reply
from ragtrial.llm.tokens import count_tokens
from ragtrial.prompts import load_prompt

SCORING, CLASSIC, CLASSIC_TIES = "judge_score", "judge_classic", "judge_classic_ties"
# What the simulated endpoint reports as the model that answered.
SERVED_MODEL = "simulated judge"


class NotAJudgeCall(ValueError):
    """A call the simulated judge cannot answer: not one of the judge prompts, or an answer it never saw."""


@dataclass(frozen=True)
class SimulatedAnswer:
    """What the judge knows of an answer text: the method run that wrote it and its latent quality per
    aspect (`JudgeModel.aspects` order).
    """

    method: str
    quality: tuple[float, ...]


@cache
def prompt_pattern(name: str) -> re.Pattern[str]:
    """A regular expression matching prompt `name`'s rendered user turn, its question, answers and
    aspect order captured; other placeholders (rubrics, reply format) match anything.
    """
    captured = {"question", "answer_1", "answer_2", "aspect_order"}
    parts = re.split(r"\$(\w+)", load_prompt(name).template)
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else (f"(?P<{part}>.*?)" if part in captured else ".*?")
        for i, part in enumerate(parts)
    )
    return re.compile(pattern, re.DOTALL)


class SimulatedJudge:
    """The transport: `__call__(call) -> Reply`. `answers` maps every answer text it may be shown to
    what it knows of it; `repeats` is the unbiased protocol's N, so that a call's replicate
    (trial x N + repeat) names its trial (classic calls are trial 0).
    """

    def __init__(
        self, model: JudgeModel, answers: Mapping[str, SimulatedAnswer], seed: int, repeats: int = 1
    ):
        self.model, self.answers, self.seed, self.repeats = model, answers, seed, repeats
        self._trial_shifts: dict[tuple[int, str], float] = {}
        self._token_counts: dict[str, int] = {}  # prompt frames and texts

    def trial_shift(self, trial: int, method: str) -> float:
        """Method `method`'s shift in trial `trial` (sd trial_sd / sqrt 2, so trial_sd on a difference)."""
        key = (trial, method)
        if key not in self._trial_shifts:
            rng = np.random.default_rng([self.seed, trial, zlib.crc32(method.encode())])
            self._trial_shifts[key] = float(rng.normal(0.0, self.model.trial_sd / np.sqrt(2)))
        return self._trial_shifts[key]

    def _read(self, call: Call) -> tuple[str, re.Match[str]]:
        name = call.prompt.partition("@")[0]
        if name not in (SCORING, CLASSIC, CLASSIC_TIES):
            raise NotAJudgeCall(
                f"the simulated judge answers the judge prompts ({SCORING}, {CLASSIC}, {CLASSIC_TIES}); "
                f"got prompt {call.prompt!r} at stage {call.stage!r}"
            )
        texts = [m["content"] for m in call.request.get("messages", [])] or [call.request.get("prompt", "")]
        for text in texts:
            if found := prompt_pattern(name).search(text):
                return name, found
        raise NotAJudgeCall(
            f"prompt {call.prompt!r} at stage {call.stage!r}: its text does not follow {name}"
        )

    def _answer(self, text: str, call: Call) -> SimulatedAnswer:
        if text not in self.answers:
            raise NotAJudgeCall(
                f"stage {call.stage!r}: an answer the simulated judge was not given: {text[:80]!r}"
            )
        return self.answers[text]

    def __call__(self, call: Call) -> Reply:
        name, found = self._read(call)
        shown = [found["answer_1"], found["answer_2"]]
        answers = [self._answer(text, call) for text in shown]
        trial = call.replicate // self.repeats if name == SCORING else 0
        words = np.array([word_count(text) for text in shown])
        shift = np.array([self.trial_shift(trial, a.method) for a in answers])
        quality = np.array([a.quality for a in answers])
        rng = np.random.default_rng([self.seed, int(call.key[:15], 16)])
        if name == SCORING:
            order = [self.model.aspects.index(a.strip()) for a in found["aspect_order"].split(",")]
            scores = rubric_scores(self.model, quality[:, order], words, shift, Draws.of(rng, (), len(order)))
            reply = {"answer_1": scores[0].tolist(), "answer_2": scores[1].tolist()}
        else:
            criteria = criterion_quality(quality, self.model.aspects)
            draws = Draws.of(rng, (), len(CLASSIC_CRITERIA))
            picks = classic_picks(self.model, criteria, words, shift, name == CLASSIC_TIES, draws)
            reply = dict(zip(CLASSIC_CRITERIA, picks.tolist(), strict=True))
        text = json.dumps(reply)
        return Reply(text, self._prompt_tokens(name, found), count_tokens(text), served_model=SERVED_MODEL)

    def _prompt_tokens(self, name: str, found: re.Match[str]) -> int:
        """cl100k tokens of the prompt: its frame's (once) plus its question's and answers' (once each),
        as `judge.estimate.judge_prompt_tokens` counts them; an exact count per call would cost more
        than the rest of the simulated call.
        """
        if name not in self._token_counts:
            self._token_counts[name] = count_tokens(found.string) - sum(
                count_tokens(found[part]) for part in ("question", "answer_1", "answer_2")
            )
        for part in ("question", "answer_1", "answer_2"):
            if found[part] not in self._token_counts:
                self._token_counts[found[part]] = count_tokens(found[part])
        return self._token_counts[name] + sum(
            self._token_counts[found[p]] for p in ("question", "answer_1", "answer_2")
        )


# The settings of a simulated judge's LLM: one request at a time (its in-memory cache is per thread), an
# endpoint URL that is never contacted (the transport answers every call).
SIMULATED_LLM = LLMSettings(
    backend="openai_compatible",
    base_url="http://simulated.invalid/v1",
    model="simulated-judge",
    fold_system=False,
    json_mode="json_schema",
)


def simulated_llm(judge: SimulatedJudge, run_id: str = "calibration") -> LLM:
    """An LLM whose transport is `judge`, with a response cache in memory and a ledger in memory of its
    own (one simulated study's calls; nothing is written to the run's cache or ledger).
    """
    return LLM(
        SIMULATED_LLM,
        ResponseCache(":memory:"),
        Ledger(run_id),
        lambda: "simulated://judge",
        transport=judge,
    )
