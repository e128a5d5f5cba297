"""Benchmark (issue 39): tokens/s of the embedded Gemma 3 270M on this machine's cores, served by
llama.cpp's own `llama-server` (the kit's embedded server, `ragtrial.llm.server`) at 1, 2, 4 and 8
parallel sequences (continuous batching), and, when llama-cpp-python[server]==0.3.36 is installed
beside the kit (`pip install`; the kit no longer needs it), by llama-cpp-python's server, which
answers one request at a time (the kit's embedded server before issue 39).

Both servers load the same GGUF, bound to 127.0.0.1, `--threads` threads, the same gemma chat
template. Two workloads, each `--requests` requests sent `slots` at a time:
  answer    the kit's answer prompt (`query/answer`) over four passages of A Christmas Carol
            (~1,100 prompt tokens, a shared instruction prefix), replies capped at 32 tokens:
            prompt-bound, as the kit's QA answers and judge calls are
  generate  a passage's first sentence, continued for 128 tokens: completion-bound
Per server and workload: wall time, Σ prompt and completion tokens (the servers' usage), the
aggregate prompt tokens/s of `answer` and completion tokens/s of `generate`, each as a ratio to
the first server's (llama-cpp-python's when installed), and the share of replies identical to
`llama-server --parallel 1`'s (temperature 0, one seed: batching may change a reply's arithmetic).
Ratios within one run (the machine is shared).

    .venv/bin/python bench/embedded_parallel.py [--parallel 1 2 4 8] [--requests 16] [--threads 2]
        [--out bench_embedded_parallel]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import openai
import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dress_rehearsal import markdown_table  # noqa: E402  (bench/, the script's folder)

from ragtrial.config.data import data_root  # noqa: E402
from ragtrial.config.llm import LLMSettings  # noqa: E402
from ragtrial.llm.server import LOOPBACK, EmbeddedServer, free_port, gguf_path  # noqa: E402
from ragtrial.prompts import load_prompt  # noqa: E402

BOOK = Path("gutenberg_christmas_carol") / "a_christmas_carol_pg24022.txt"
PASSAGE_WORDS = 180
N_CTX_PER_SLOT = 8192  # the kit's `llm.embedded.n_ctx`


def passages(count: int) -> list[str]:
    words = (data_root() / BOOK).read_text(encoding="utf-8").split()
    start = 2000  # past the Gutenberg front matter
    return [
        " ".join(words[start + i * PASSAGE_WORDS : start + (i + 1) * PASSAGE_WORDS]) for i in range(count)
    ]


def workloads(requests: int) -> dict[str, tuple[list[list[dict[str, str]]], int]]:
    """Per workload: the chat messages of each request and the reply cap."""
    texts, answer = passages(requests * 4), load_prompt("answer")
    asked = [
        answer.render(
            context="\n\n".join(texts[4 * i : 4 * i + 4]), question=f"Who speaks in passage {i % 4 + 1}?"
        )
        for i in range(requests)
    ]
    continued = [[{"role": "user", "content": text.split(".")[0] + "."}] for text in texts[:requests]]
    return {"answer": (asked, 32), "generate": (continued, 128)}


@contextmanager
def llama_server(parallel: int, threads: int) -> Iterator[str]:
    settings = LLMSettings.model_validate(
        {"model": "gemma", "embedded": {"n_threads": threads, "parallel": parallel, "n_ctx": N_CTX_PER_SLOT}}
    )
    server = EmbeddedServer(settings)
    try:
        yield server.start()
    finally:
        server.stop()


@contextmanager
def llama_cpp_python(threads: int) -> Iterator[str]:
    """llama-cpp-python's server, as the kit ran it before issue 39 (gemma chat format, one context)."""
    port = free_port()
    command = [
        *(sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--model_alias", "gemma"),
        *("--host", LOOPBACK, "--port", str(port), "--n_threads", str(threads)),
        *("--n_ctx", str(N_CTX_PER_SLOT), "--chat_format", "gemma", "--verbose", "false"),
    ]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"llama-cpp-python's server exited with code {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/v1/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.25)
        else:
            raise TimeoutError("llama-cpp-python's server did not answer within 180 s")
        yield f"http://{LOOPBACK}:{port}/v1"
    finally:
        process.terminate()
        process.wait(30)


def measure(base_url: str, slots: int, messages: list[list[dict[str, str]]], max_tokens: int) -> dict:
    client = openai.OpenAI(base_url=base_url, api_key="none", timeout=600, max_retries=0)

    def ask(one: list[dict[str, str]]) -> tuple[str, int, int]:
        reply = client.chat.completions.create(
            model="gemma",
            messages=one,
            max_tokens=max_tokens,
            temperature=0.0,
            seed=1,  # type: ignore[arg-type]
        )
        usage = reply.usage
        return reply.choices[0].message.content or "", usage.prompt_tokens, usage.completion_tokens

    started = time.monotonic()
    with ThreadPoolExecutor(slots) as pool:
        replies = list(pool.map(ask, messages))
    wall = time.monotonic() - started
    return {
        "wall_s": wall,
        "prompt_tokens": sum(r[1] for r in replies),
        "completion_tokens": sum(r[2] for r in replies),
        "texts": [r[0] for r in replies],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="bench_embedded_parallel")
    args = parser.parse_args()
    loads = workloads(args.requests)
    servers: list[tuple[str, int, Callable]] = []
    if importlib.util.find_spec("llama_cpp") is not None:
        servers.append(("llama-cpp-python server", 1, lambda: llama_cpp_python(args.threads)))
    else:
        print("llama-cpp-python is not installed: its server's rows are left out", flush=True)
    servers += [
        (f"llama-server --parallel {n}", n, lambda n=n: llama_server(n, args.threads)) for n in args.parallel
    ]
    rows = []
    for name, slots, start in servers:
        with start() as base_url:
            for workload, (messages, cap) in loads.items():
                measure(base_url, slots, messages[:slots], cap)  # warm-up: model pages, prompt cache
                result = measure(base_url, slots, messages, cap)
                counted = result["prompt_tokens"] if workload == "answer" else result["completion_tokens"]
                rows.append(
                    {
                        "server": name,
                        "workload": workload,
                        **result,
                        "tokens_per_s": counted / result["wall_s"],
                        "load_1min": os.getloadavg()[0],  # the machine is shared: what else ran
                    }
                )
                print({k: v for k, v in rows[-1].items() if k != "texts"}, flush=True)
    table = pd.DataFrame(rows)
    one_slot = table[table["server"] == "llama-server --parallel 1"].set_index("workload")["texts"]
    table["identical_to_parallel_1"] = [
        sum(a == b for a, b in zip(texts, one_slot[workload], strict=True)) / len(texts)
        if workload in one_slot
        else None
        for texts, workload in zip(table.pop("texts"), table["workload"], strict=True)
    ]
    base = table[table["server"] == servers[0][0]].set_index("workload")["tokens_per_s"]
    table[f"ratio_to_{servers[0][0]}"] = table["tokens_per_s"] / table["workload"].map(base)
    table.to_csv(f"{args.out}.csv", index=False)
    markdown = markdown_table(table.round(3))
    Path(f"{args.out}.md").write_text(markdown, encoding="utf-8")
    print(markdown)


if __name__ == "__main__":
    main()
