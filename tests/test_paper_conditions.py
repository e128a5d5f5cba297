"""`docs/paper_conditions.md` is the test's data: every row names a paper's condition, the params
file and runs that realize it, the dotted setting and its value; this test resolves each paper params
file (its shared settings merged into each run, as a batch runs them) and checks every row. A row
without a setting must give the deviation's reason; every seed has a table and every paper params
file is covered by at least one row. Each row also names the behaviour tests that run its step and
assert what happened (`tests/x.py::test_y`, comma-separated), or says `untested: <why>`; a named test
must exist in its file.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT, SHARED_DATASETS, make_llm
from index.test_extraction import answer_by_text, chunks, graph
from methods.test_methods import QUESTION, Run, passages_index

from ragtrial.config import Settings
from ragtrial.config.batch import RunSpec, load_batch
from ragtrial.config.index import IndexSettings
from ragtrial.data import load_dataset
from ragtrial.evaluation.diagnostics import diagnostics_summary
from ragtrial.evaluation.judge.pipeline import comparison_design
from ragtrial.evaluation.judge.protocols import score_schema, scoring_prompt
from ragtrial.evaluation.retrieval_benchmark import benchmark_questions
from ragtrial.index.extract_llm_graph import extract_llm_graph
from ragtrial.llm.tokens import count_tokens
from ragtrial.methods.registry import make_methods
from ragtrial.prompts import load_prompt
from ragtrial.questions.corpus_questions import dataset_description

TABLE = PROJECT_ROOT / "docs" / "paper_conditions.md"
SEEDS = ("000", "001", "002", "003", "004")
COLUMNS = [
    "condition (as the paper states it)",
    "params file",
    "runs",
    "setting",
    "value",
    "deviation and why",
    "behaviour test",
]
UNTESTED = "untested:"
NO_SETTING = "—"
ENDPOINT = {"llm": {"base_url": "http://127.0.0.1:1/v1"}}  # the paper batches take it from --set


@dataclass(frozen=True)
class Row:
    seed: str
    line: int
    condition: str
    params: str
    runs: str
    setting: str
    value: str
    deviation: str
    behaviour: str

    def __str__(self) -> str:
        return f"{TABLE.name}:{self.line} (seed {self.seed}: {self.condition})"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _code(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


@cache
def rows() -> tuple[Row, ...]:
    found, seed, header = [], None, None
    for number, line in enumerate(TABLE.read_text(encoding="utf-8").splitlines(), start=1):
        if heading := re.match(r"^## Seed (\d{3})\b", line):
            seed, header = heading.group(1), None
        elif line.startswith("|") and seed:
            cells = _cells(line)
            if header is None:
                header = cells
                assert header == COLUMNS, f"{TABLE.name}:{number}: columns {header}, expected {COLUMNS}"
            elif not set("".join(cells)) <= set("-: "):
                assert len(cells) == len(COLUMNS), f"{TABLE.name}:{number}: {len(cells)} cells"
                condition, params, runs, setting, value, deviation, behaviour = cells
                found.append(
                    Row(
                        seed,
                        number,
                        condition,
                        _code(params),
                        runs,
                        _code(setting),
                        _code(value),
                        deviation,
                        behaviour,
                    )
                )
        else:
            header = None  # a table ends at its first line that is not a row
    return tuple(found)


@cache
def runs_of(params: str) -> tuple[RunSpec, ...]:
    return tuple(load_batch(PROJECT_ROOT / params, ENDPOINT, notebooks_dir=PROJECT_ROOT / "notebooks")[0])


def _selected(row: Row) -> list[RunSpec]:
    specs = runs_of(row.params)
    if row.runs == "all":
        return list(specs)
    chosen = [s for s in specs if row.runs in (s.label, s.notebook)]
    assert chosen, f"{row}: no run labelled or of notebook {row.runs!r} in {row.params}"
    return chosen


def _setting(spec: RunSpec, dotted: str) -> Any:
    value: Any = spec.settings.model_dump(mode="json")
    for part in dotted.split("."):
        assert isinstance(value, dict) and part in value, f"no setting {dotted!r}"
        value = value[part]
    return value


def test_every_seed_has_a_table_and_every_paper_params_file_a_row() -> None:
    assert {r.seed for r in rows()} == set(SEEDS)
    covered = {r.params for r in rows() if r.params != NO_SETTING}
    paper_files = {f"params/{p.name}" for p in (PROJECT_ROOT / "params").glob("paper_*.yaml")}
    assert paper_files <= covered, f"paper params files without a row: {sorted(paper_files - covered)}"


@pytest.mark.parametrize("row", rows(), ids=str)
def test_each_condition_is_realized_or_a_stated_deviation(row: Row) -> None:
    if row.setting == NO_SETTING:
        assert len(row.deviation) > 20 and row.deviation != NO_SETTING, f"{row}: a deviation needs its reason"
        return
    expected = yaml.safe_load(row.value)
    for spec in _selected(row):
        actual = _setting(spec, row.setting)
        assert actual == expected, (
            f"{row}: {row.params} run {spec.label or spec.notebook}: {row.setting} = {actual!r}"
        )


def defined_tests(tree: ast.Module) -> set[str]:
    """The test functions a module defines at its top level or in its classes."""
    names = set()
    for node in tree.body:
        bodies = node.body if isinstance(node, ast.ClassDef) else [node]
        names |= {n.name for n in bodies if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return {n for n in names if n.startswith("test_")}


def behaviour_problems(cell: str, root: Path) -> list[str]:
    """What is wrong with a row's behaviour-test cell: empty, an `untested:` without a reason of a few
    words, or a node id whose file or test function does not exist (`test_x[case]` names `test_x`).
    """
    if not cell:
        return ["no behaviour test and no 'untested: <why>'"]
    if cell.startswith(UNTESTED):
        reason = cell.removeprefix(UNTESTED).strip()
        return [] if len(reason.split()) >= 4 else [f"'untested' needs its reason: {cell!r}"]
    problems = []
    for node_id in (_code(part.strip()) for part in cell.split(",")):
        path, _, name = node_id.partition("::")
        name = name.split("[")[0]
        file = root / path
        if not (path.startswith("tests/") and path.endswith(".py") and name):
            problems.append(f"{node_id!r} is not a node id tests/x.py::test_y")
        elif not file.is_file():
            problems.append(f"{node_id!r}: no file {path}")
        elif name not in defined_tests(ast.parse(file.read_text(encoding="utf-8"))):
            problems.append(f"{node_id!r}: {path} defines no {name}")
    return problems


@pytest.mark.parametrize("row", rows(), ids=str)
def test_each_condition_names_its_behaviour_test_or_why_it_has_none(row: Row) -> None:
    assert not behaviour_problems(row.behaviour, PROJECT_ROOT), (
        f"{row}: {behaviour_problems(row.behaviour, PROJECT_ROOT)}"
    )


def test_the_checker_refuses_a_missing_test_a_missing_file_and_a_bare_untested(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_there():\n    pass\n\nclass TestGroup:\n    def test_in_class(self):\n        pass\n"
    )
    assert (
        behaviour_problems("`tests/test_x.py::test_there`, `tests/test_x.py::test_in_class[a-b]`", tmp_path)
        == []
    )
    assert behaviour_problems("untested: the model is the user's choice", tmp_path) == []
    assert behaviour_problems("`tests/test_x.py::test_gone`", tmp_path) == [
        "'tests/test_x.py::test_gone': tests/test_x.py defines no test_gone"
    ]
    assert behaviour_problems("`tests/test_y.py::test_there`", tmp_path) == [
        "'tests/test_y.py::test_there': no file tests/test_y.py"
    ]
    assert behaviour_problems("untested: why", tmp_path) and behaviour_problems("", tmp_path)
    assert behaviour_problems("test_there", tmp_path)


# ---------------------------------------------------------------- behaviour tests of rows that had none


def test_the_answer_requests_carry_the_answer_settings_token_cap_prompt_and_context_budget(
    scripted, tmp_path
):
    # seed 000's judge rows: judge.answer_max_tokens, judge.answer_prompt and judge.context_budget reach
    # the requests the method factory's methods send
    scripted.default_reply = lambda body: "London"
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    index = passages_index(8)
    per_chunk = count_tokens(index.chunks["text"][0])
    settings = Settings(retrieval={"k": 8})
    answer_settings = settings.judge.model_copy(
        update={"answer_max_tokens": 400, "answer_prompt": "answer_long", "context_budget": 3 * per_chunk}
    )
    methods, _ = make_methods(["naive_rag"], index, Run(settings, llm), answer_settings)
    methods[0].answer(QUESTION)
    (request,) = [r["body"] for r in scripted.chat_requests()]
    prompt = "\n".join(m["content"] for m in request["messages"])
    assert request["max_tokens"] == 400
    assert prompt.count("Passage ") == 3  # 8 retrieved, 3 fit the budget
    assert request["messages"][0]["content"] == load_prompt("answer_long").system  # no word cap


def test_the_diagnostics_summary_flags_each_metric_under_the_seeds_threshold():
    # seed 004's relationship-recall 0.80, grounding 0.90 and citation 0.95: a mean just under is
    # flagged, a mean at the threshold is not
    thresholds = {"relationship_recall": 0.80, "grounding": 0.90, "citation_coverage": 0.95}
    settings = Settings(
        diagnostics={
            "relationship_recall_threshold": 0.8,
            "grounding_threshold": 0.9,
            "citation_threshold": 0.95,
        }
    ).diagnostics
    per_answer = pd.DataFrame(
        [
            {"method": method, "category": "multi_hop", **{m: t - gap for m, t in thresholds.items()}}
            for method, gap in (("under", 0.01), ("at", 0.0))
        ]
    )
    summary = diagnostics_summary(per_answer, list(thresholds), settings).set_index(["method", "metric"])
    for metric, threshold in thresholds.items():
        assert summary.loc[("under", metric), "threshold"] == threshold
        assert summary.loc[("under", metric), "below_threshold"]
        assert not summary.loc[("at", metric), "below_threshold"]


def test_the_extraction_prompt_asks_for_the_entity_types_and_the_reply_schema_allows_only_them(
    scripted, tmp_path
):
    # seed 002's index.entity_types: GraphRAG's defaults reach the extraction request
    answer_by_text(scripted, {"Ada met Bob": graph([("Ada Lind", "person", "an engineer")])})
    types = ["organization", "person", "geo", "event"]
    llm = make_llm(scripted.base_url, tmp_path)
    extract_llm_graph(llm, chunks("Ada met Bob."), IndexSettings(llm_max_chunks=None, entity_types=types))
    request = scripted.chat_requests()[0]["body"]
    assert "organization, person, geo, event" in "\n".join(m["content"] for m in request["messages"])
    schema = request["response_format"]["schema"]
    entity = schema["properties"]["entities"]["items"]
    entity = schema["$defs"][entity["$ref"].rsplit("/", 1)[-1]] if "$ref" in entity else entity
    assert entity["properties"]["type"]["enum"] == types


def test_the_judge_compares_every_pair_of_paper_judges_methods_and_only_the_listed_pairs_of_the_systems():
    # seed 000's judge.methods (Figs. 14-16, all pairs) and judge.pairs (Fig. 14, each system vs NaiveRAG)
    def pairs(params: str) -> list[tuple[str, str]]:
        (spec,) = [s for s in runs_of(params) if s.notebook == "07_pairwise_method_comparison"]
        cfg = spec.settings.judge
        return list(comparison_design(cfg, cfg.methods).method_pairs)

    judged = pairs("params/paper_judge.yaml")
    assert len(judged) == 6 and {frozenset(p) for p in judged} == {
        frozenset(p) for p in combinations(["lightrag", "fastgraphrag", "local_search", "naive_rag"], 2)
    }
    systems = pairs("params/paper_upstream_systems.yaml")
    assert len(systems) == 3 and all(b == "naive_rag" for _, b in systems)


def test_the_scoring_prompt_holds_the_four_rubrics_in_order_and_the_reply_needs_four_scores():
    # seed 000's judge.aspects (IV-C): each aspect's rubric is in the prompt, in the order of the scores
    aspects = ("comprehensiveness", "relevance", "empowerment", "directness")
    prompt = scoring_prompt(aspects)
    places = [prompt.template.index(load_prompt(f"judge_rubric_{a}").template) for a in aspects]
    assert places == sorted(places) and ", ".join(aspects) in prompt.template
    schema = score_schema(aspects)
    assert schema.model_validate({"answer_1": [5, 4, 3, 2], "answer_2": [0, 1, 2, 3]})
    with pytest.raises(ValueError):
        schema.model_validate({"answer_1": [5, 4, 3], "answer_2": [0, 1, 2]})


def test_the_description_of_a_document_is_its_head_after_the_offset_and_its_last_tokens():
    # seed 000's questions.head_offset_tokens / head_tokens / tail_tokens as paper_questions.yaml sets
    # them: LightRAG's head slice (tokens 1000-2000) and the paper's tail (the last 1,000 tokens)
    cfg = runs_of("params/paper_questions.yaml")[0].settings.questions
    text = "apple " * 1000 + "banana " * 1500 + "cherry " * 1500
    documents = pd.DataFrame({"doc_id": ["d0"], "title": [""], "text": [text]})
    description, used = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
    )
    words = description.split()
    assert used == ["d0"] and "apple" not in words  # the first 1,000 tokens are skipped
    assert abs(words.count("banana") - 1000) <= 1 and abs(words.count("cherry") - 1000) <= 1


def test_the_benchmark_scores_100_multihop_rag_queries_of_each_type_with_evidence():
    # seed 001's benchmark.questions_per_type on the shared MultiHop-RAG data: a seeded 100 of each
    # type with evidence passages (null queries have none), as the run of params/real_evidence.yaml
    (spec,) = [s for s in runs_of("params/real_evidence.yaml") if s.label.startswith("MultiHop-RAG")]
    if not (SHARED_DATASETS / "multihop_rag").is_dir():
        pytest.skip("the shared multihop_rag folder is absent (real-data tests need the shared data)")
    dataset = load_dataset("multihop_rag", SHARED_DATASETS / "multihop_rag")
    chosen = benchmark_questions(dataset.questions, spec.settings.benchmark)
    assert Counter(q.question_type for q in chosen) == {"inference": 100, "comparison": 100, "temporal": 100}
