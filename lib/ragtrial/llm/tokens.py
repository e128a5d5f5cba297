"""Token counting offline: tiktoken's cl100k_base from the copy llama-index-core ships.

tiktoken downloads encodings on first use, which this kit must never do; llama-index-core
carries cl100k_base in its `_static/tiktoken_cache`, so point tiktoken there unless the user
already chose a cache folder.
"""

from __future__ import annotations

import os
from functools import cache
from importlib.util import find_spec
from pathlib import Path


@cache
def get_encoding(name: str = "cl100k_base"):
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        spec = find_spec("llama_index.core")
        if spec is not None and spec.origin is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(Path(spec.origin).parent / "_static" / "tiktoken_cache")
    import tiktoken

    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    return len(get_encoding(encoding).encode(text, disallowed_special=()))
