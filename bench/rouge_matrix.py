"""Benchmark: rouge-score's per-pair loop vs `ragtrial.evaluation.answer_metrics.rouge_l_matrix`
on claim-like texts.

    .venv/bin/python bench/rouge_matrix.py [--n 1000] [--sample-pairs 20000]

The per-pair loop over all n(n-1)/2 pairs takes minutes, so it is timed on a random sample of
pairs and extrapolated; the sampled scores double as an exactness check of the matrix.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import random
import time
from collections.abc import Callable

from rouge_score import rouge_scorer

from ragtrial.evaluation.answer_metrics import rouge_l_matrix

SEED = 20240601
SUFFIXES = ["", "", "", "s", "ed", "ing", "ly", "tion", "er"]  # inflections give the stemmer work


def claim_like_texts(n: int, seed: int = SEED) -> list[str]:
    """N sentences of 10-25 words from a fixed pseudo-word vocabulary, with numbers and punctuation."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ren", "sto", "vel", "dra", "pun", "ix", "or", "tem", "qua", "bri", "ne"]
    stems = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(1500)})
    function_words = ["the", "a", "of", "in", "and", "to", "was", "by", "on", "for", "with", "that"]

    def word() -> str:
        roll = rng.random()
        if roll < 0.3:
            return rng.choice(function_words)
        if roll < 0.35:
            return str(
                rng.choice([rng.randint(1, 100), rng.randint(1900, 2025), round(rng.uniform(0, 99), 1)])
            )
        return rng.choice(stems) + rng.choice(SUFFIXES) + rng.choice(["", "", "", "", ",", "'s"])

    sentences = []
    for _ in range(n):
        words = [word() for _ in range(rng.randint(10, 25))]
        sentences.append(" ".join(words).rstrip(",").capitalize() + ".")
    return sentences


def best_of(repeats: int, run: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="number of texts")
    parser.add_argument("--sample-pairs", type=int, default=20000, help="pairs timed for the per-pair loop")
    args = parser.parse_args()

    texts = claim_like_texts(args.n)
    all_pairs = args.n * (args.n - 1) // 2
    rng = random.Random(SEED)
    sample = [tuple(rng.sample(range(args.n), 2)) for _ in range(min(args.sample_pairs, all_pairs))]
    print(f"n = {args.n} texts ({all_pairs:,} pairs), {len(sample):,} sampled pairs for the per-pair loop")
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}"
    )

    rows = []
    for use_stemmer in (False, True):
        scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)
        start = time.perf_counter()
        sampled_scores = [scorer.score(texts[i], texts[j])["rougeL"].fmeasure for i, j in sample]
        loop_seconds = (time.perf_counter() - start) / len(sample) * all_pairs
        for n_jobs in (1, 2):
            matrix = rouge_l_matrix(texts, use_stemmer=use_stemmer, n_jobs=n_jobs)
            worst = max(
                abs(matrix[i, j] - score) for (i, j), score in zip(sample, sampled_scores, strict=True)
            )
            matrix_seconds = best_of(
                3, functools.partial(rouge_l_matrix, texts, use_stemmer=use_stemmer, n_jobs=n_jobs)
            )
            rows.append((use_stemmer, n_jobs, loop_seconds, matrix_seconds, worst))

    print()
    print(
        "| stemmer | n_jobs | rouge-score per-pair loop (s)* | `rouge_l_matrix` (s)** | speedup "
        "| max abs diff |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for use_stemmer, n_jobs, loop_seconds, matrix_seconds, worst in rows:
        print(
            f"| {'yes' if use_stemmer else 'no'} | {n_jobs} | {loop_seconds:,.1f} | {matrix_seconds:.3f} "
            f"| {loop_seconds / matrix_seconds:,.0f}× | {worst:.1e} |"
        )
    print()
    print(
        f"\\* `RougeScorer(['rougeL']).score(a, b)` timed on {len(sample):,} random pairs, "
        f"extrapolated to all {all_pairs:,} pairs of n = {args.n:,}.  "
    )
    print("\\*\\* whole n×n matrix, tokenization included, best of 3. max abs diff: over the sampled pairs.")
    slowest = min(loop / fast for _, _, loop, fast, _ in rows)
    print(f"\nslowest speedup {slowest:,.0f}× (target ≥ 20×): {'met' if slowest >= 20 else 'NOT met'}")


if __name__ == "__main__":
    main()
