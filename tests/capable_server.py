"""A simulated capable endpoint: `latency_server`'s schema-valid replies, with a per-request latency
distribution, a rate limit, and a judge that follows a known truth (issue 36's dress rehearsal).

Latency: log-normal with a set median and p99, scaled by the request's prompt and reply length
(per 1,000 tokens beyond the first, `per_1k_tokens` more), drawn from the request's hash (the same
request always takes as long), times `time_scale` (1/100 runs a rehearsal at a hundredth of real
time; `stats()["latency_s"]` sums the unscaled latencies, so the ideal wall is that sum / slots).
Rate limit: a token bucket of `rate_per_s` requests a second (burst one second's worth); a request
beyond it gets HTTP 429 with the Retry-After the bucket needs (at least 1 s, as the header counts
whole seconds in the wild, times `time_scale`), and is counted in `stats()["refused"]`.

The judge's truth is planted in the answers: `Truth.quality` maps a marker word to a quality
(e.g. {"Alpha": 1.0, "Beta": 0.0}); an answer's true quality is its first marker's, plus a
per-answer draw of spread `spread` (from the answer text's hash, so questions differ). The kit's
pairs carry the text of each method's answer, so a test writes each method's marker into its
answers and the judge can tell methods apart from nothing but what the kit shows it. Free-text
replies (answers) start with every marker their prompt contains, as an answer names what it was
shown: a marker that only one method's context carries (a context kind such as
"(community_report)") plants that method's quality through the whole pipeline. The two
judge formats are recognised by their reply schema (classic: a winner per criterion and
"overall"; unbiased: "answer_1"/"answer_2" score lists) and read the answers out of the prompt:
  unbiased  each aspect score = round(2.5 + quality + length_bias·log2(words/100)
            + position_bonus if shown first + call noise), clipped to 0..5
  classic   P(answer 1 wins) = logistic((q1 - q2 + length terms) / 0.25 + logit(position_bias));
            with ties allowed, |q1 - q2| < tie_margin is a tie.
So with equal qualities the classic judge picks the first-shown answer with probability
`position_bias`, and `true_relative_win_rate` gives the relative win rate the unbiased protocol
should recover (wins minus losses of the noiseless qualities over the pairs).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

from latency_server import Draw, LatencyServer, LatencyServerProcess, count_tokens, prompt_texts, reply_schema

Z99 = NormalDist().inv_cdf(0.99)
SCORE_ANSWERS = re.compile(
    r"\[Answer 1\]\n(.*?)\n\[End of Answer 1\].*?\[Answer 2\]\n(.*?)\n\[End of Answer 2\]", re.S
)
CLASSIC_ANSWERS = re.compile(r"Answer 1:\n(.*?)\n\nAnswer 2:\n(.*?)\n\nReply with", re.S)


@dataclass(frozen=True)
class Truth:
    quality: dict[str, float] = field(default_factory=dict)  # marker word -> quality
    spread: float = 0.5  # sd of an answer's own quality around its marker's
    position_bias: float = 0.5  # P(first-shown answer wins | equal qualities), classic judge
    position_bonus: float = 0.0  # score points the first-shown answer gains, unbiased judge
    length_bias: float = 0.0  # quality per doubling of an answer's words (100 words: none)
    call_noise: float = 0.3  # sd of one judge call's noise around the true score
    tie_margin: float = 0.1  # |quality difference| a tie-allowing judge calls a tie

    def quality_of(self, text: str) -> float:
        """The true quality of an answer: its marker's plus its own draw (no biases)."""
        marker = next((q for word, q in self.quality.items() if word in text), 0.0)
        return marker + self.spread * unit_normal(hashlib.sha256(text.encode()).digest())

    def length_term(self, text: str) -> float:
        return self.length_bias * math.log2(max(1, len(text.split())) / 100)


def unit_normal(digest: bytes) -> float:
    u = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64
    return NormalDist().inv_cdf(u)


def true_relative_win_rate(truth: Truth, texts_a: list[str], texts_b: list[str]) -> float:
    """Wins minus losses of A's noiseless quality over B's, per pair, averaged."""
    signs = [
        (qa > qb) - (qa < qb)
        for qa, qb in (
            (truth.quality_of(a), truth.quality_of(b)) for a, b in zip(texts_a, texts_b, strict=True)
        )
    ]
    return sum(signs) / len(signs)


class CapableServer(LatencyServer):
    """`with CapableServer(...) as server:` serves on `server.base_url`; see the module docstring."""

    def __init__(
        self,
        median_s: float = 0.8,
        p99_s: float = 5.0,
        slots: int = 64,
        *,
        time_scale: float = 1.0,
        rate_per_s: float | None = None,
        per_1k_tokens: float = 0.5,
        truth: Truth | None = None,
    ):
        super().__init__(median_s, slots)
        self.sigma = math.log(p99_s / median_s) / Z99
        self.time_scale, self.rate_per_s, self.per_1k_tokens = time_scale, rate_per_s, per_1k_tokens
        self.truth = truth or Truth()
        self.refused = 0
        self.latency_sum = 0.0
        self._bucket = rate_per_s or 0.0
        self._filled_at = time.monotonic()

    def refusal(self, body: dict[str, Any]) -> float | None:
        if self.rate_per_s is None:
            return None
        with self._lock:
            now = time.monotonic()
            # the bucket refills in scaled time: a 1/100 rehearsal has 100x the real rate
            refill = (now - self._filled_at) / self.time_scale * self.rate_per_s
            self._bucket = min(self.rate_per_s, self._bucket + refill)
            self._filled_at = now
            if self._bucket >= 1:
                self._bucket -= 1
                return None
            self.refused += 1
            return max(1.0, (1 - self._bucket) / self.rate_per_s) * self.time_scale

    def latency_of(self, body: dict[str, Any], reply: dict[str, Any]) -> float:
        """Unscaled: log-normal from the request's hash, longer for long prompts and replies."""
        seed = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
        tokens = reply["usage"]["total_tokens"]
        latency = self.latency_s * math.exp(self.sigma * unit_normal(seed))
        latency *= 1 + self.per_1k_tokens * max(0, tokens - 1000) / 1000
        with self._lock:
            self.latency_sum += latency
        return latency * self.time_scale

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {
                "requests": self.requests,
                "max_in_flight": self.max_in_flight,
                "refused": self.refused,
                "latency_s": self.latency_sum,
            }

    def reset_counts(self) -> None:
        super().reset_counts()
        with self._lock:
            self.refused, self.latency_sum = 0, 0.0

    def completion(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        reply = super().completion(body, chat)
        schema = reply_schema(body) if chat else None
        choice = reply["choices"][0]
        if schema is None:  # free text (an answer): it names the markers its prompt shows
            shown = [word for word in self.truth.quality if word in "\n".join(prompt_texts(body))]
            content = " ".join([*shown, choice["message"]["content"] if chat else choice["text"]])
        elif (verdict := self.judge(body, schema)) is not None:
            content = json.dumps(verdict)
        else:
            return reply
        if chat:
            choice["message"]["content"] = content
        else:
            choice["text"] = content
        completion_tokens = count_tokens(content)
        reply["usage"]["completion_tokens"] = completion_tokens
        reply["usage"]["total_tokens"] = reply["usage"]["prompt_tokens"] + completion_tokens
        return reply

    def judge(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any] | None:
        """A verdict following the truth, for the two judge formats; None for any other request."""
        properties = schema.get("properties", {})
        text = "\n".join(prompt_texts(body))
        draw = Draw(body)
        truth = self.truth
        if {"answer_1", "answer_2"} <= properties.keys() and (found := SCORE_ANSWERS.search(text)):
            n_aspects = properties["answer_1"].get("maxItems", 4)
            scores: dict[str, Any] = {}
            for slot, answer in (("answer_1", found.group(1)), ("answer_2", found.group(2))):
                base = 2.5 + truth.quality_of(answer) + truth.length_term(answer)
                base += truth.position_bonus if slot == "answer_1" else 0.0
                scores[slot] = [
                    min(5, max(0, round(base + truth.call_noise * _noise(draw, f"{slot}{i}"))))
                    for i in range(n_aspects)
                ]
            return scores
        if "overall" in properties and (found := CLASSIC_ANSWERS.search(text)):
            first, second = found.group(1), found.group(2)
            gap = truth.quality_of(first) - truth.quality_of(second)
            gap += truth.length_term(first) - truth.length_term(second)
            ties = 0 in properties["overall"].get("enum", [])
            bias = math.log(truth.position_bias / (1 - truth.position_bias))
            verdict = {}
            for aspect in properties:
                if ties and abs(gap) < truth.tie_margin:
                    verdict[aspect] = 0
                    continue
                p_first = 1 / (1 + math.exp(-(gap / 0.25 + bias)))
                verdict[aspect] = 1 if draw.number(aspect, 0, 9999) < p_first * 10000 else 2
            return verdict
        return None


def _noise(draw: Draw, where: str) -> float:
    return unit_normal(hashlib.sha256(f"{draw.seed}/{where}".encode()).digest())


class CapableServerProcess(LatencyServerProcess):
    """The capable server in a process of its own (`stats()` reads its counts)."""

    def __init__(self, median_s: float = 0.8, p99_s: float = 5.0, slots: int = 64, **options: Any):
        super().__init__(median_s, slots)
        self.p99_s = p99_s
        self.options = {**options, "truth": asdict(options.get("truth") or Truth())}

    def command(self) -> list[str]:
        config = {"median_s": self.latency_s, "p99_s": self.p99_s, "slots": self.slots, **self.options}
        return [sys.executable, __file__, json.dumps(config)]


if __name__ == "__main__":  # python capable_server.py CONFIG_JSON: serve, print the URL, run until killed
    config = json.loads(sys.argv[1])
    config["truth"] = Truth(**config["truth"])
    with CapableServer(**config) as served:
        print(served.base_url, flush=True)
        threading.Event().wait()
