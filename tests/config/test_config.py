import functools
import re

import pytest
import yaml

from ragtrial.cli import main
from ragtrial.config.base import ParamsError, Section
from ragtrial.config.batch import dotted_to_nested, load_batch, parse_set_overrides, settings_hash
from ragtrial.config.moved_keys import MOVED_KEYS, REMOVED_KEYS
from ragtrial.config.notebooks import SWEEP_NOTEBOOK
from ragtrial.config.settings import Settings, describe_settings, validate_settings


def write(tmp_path, data, name="batch.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_key_names_file_and_dotted_key(tmp_path):
    path = write(tmp_path, {"settings": {"llm": {"modle": "x"}}, "runs": [{"notebook": "nb"}]})
    with pytest.raises(ParamsError, match=r"batch\.yaml.*key 'llm\.modle': unknown key"):
        load_batch(path)


def test_wrong_type_names_the_key(tmp_path):
    path = write(tmp_path, {"runs": [{"notebook": "nb", "settings": {"llm": {"max_tokens": "many"}}}]})
    with pytest.raises(ParamsError, match=r"runs\.0.*key 'llm\.max_tokens'"):
        load_batch(path)


def test_unknown_batch_key_and_missing_file(tmp_path):
    with pytest.raises(ParamsError, match="key 'runz': unknown key"):
        load_batch(write(tmp_path, {"runz": []}))
    with pytest.raises(ParamsError, match="params file not found"):
        load_batch(tmp_path / "absent.yaml")


def test_missing_notebook_is_caught_before_running(tmp_path):
    (tmp_path / "notebooks").mkdir()
    path = write(tmp_path, {"runs": [{"notebook": "nope"}]})
    with pytest.raises(ParamsError, match="no notebook nope.ipynb"):
        load_batch(path, notebooks_dir=tmp_path / "notebooks")


def test_resolution_order_and_grid(tmp_path):
    path = write(
        tmp_path,
        {
            "settings": {"llm": {"max_tokens": 50, "seed": 3}},
            "runs": [
                {
                    "notebook": "nb",
                    "settings": {"llm": {"max_tokens": 60}},
                    "grid": {"llm.temperature": [0.0, 0.5], "data.seed": [1, 2]},
                }
            ],
        },
    )
    (*specs, sweep), workers = load_batch(path, parse_set_overrides(["llm.seed=9"]))
    assert workers == 1 and len(specs) == 4
    assert {(s.settings.llm.temperature, s.settings.data.seed) for s in specs} == {
        (0.0, 1),
        (0.0, 2),
        (0.5, 1),
        (0.5, 2),
    }
    assert all(s.settings.llm.max_tokens == 60 and s.settings.llm.seed == 9 for s in specs)
    assert len({s.run_id for s in specs}) == 4  # each grid point is its own run
    # the grid's sweep report follows its points, naming them in grid order
    assert (sweep.notebook, sweep.label) == (SWEEP_NOTEBOOK, "sweep of nb over data.seed x llm.temperature")
    assert sweep.settings.sweep.runs == [s.run_id for s in specs]
    assert (
        sweep.settings.sweep.keys == ["data.seed", "llm.temperature"]
        and sweep.settings.sweep.notebook == "nb"
    )
    assert sweep.settings.llm.max_tokens == 60 and sweep.settings.llm.seed == 9  # the entry's settings, --set


def test_a_grid_of_one_point_has_no_sweep_and_the_sweep_notebook_must_exist(tmp_path):
    path = write(tmp_path, {"runs": [{"notebook": "nb", "grid": {"llm.temperature": [0.0]}}]})
    assert [s.notebook for s in load_batch(path)[0]] == ["nb"]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "nb.ipynb").write_text("{}")
    path = write(tmp_path, {"runs": [{"notebook": "nb", "grid": {"llm.temperature": [0.0, 0.5]}}]})
    with pytest.raises(
        ParamsError, match=f"the sweep report of key 'runs.0.grid': no notebook {SWEEP_NOTEBOOK}"
    ):
        load_batch(path, notebooks_dir=tmp_path / "notebooks")


def test_resources_are_batch_wide_and_per_run_key_by_key_and_change_no_run_id(tmp_path):
    runs = [{"notebook": "nb"}, {"notebook": "nb", "label": "big", "resources": {"memory": "1.5 GiB"}}]
    path = write(tmp_path, {"resources": {"num_cpus": 0.5, "memory": "500MB"}, "runs": runs})
    small, big = load_batch(path)[0]
    assert (small.resources.num_cpus, small.resources.memory) == (0.5, 500 * 10**6)
    assert (big.resources.num_cpus, big.resources.memory) == (0.5, 1536 * 2**20)
    assert (
        small.run_id
        == big.run_id
        == load_batch(write(tmp_path, {"runs": runs[:1]}, "plain.yaml"))[0][0].run_id
    )


@pytest.mark.parametrize(
    ("resources", "key", "problem"),
    [
        ({"num_cpus": 0}, "resources.num_cpus", "greater than 0"),
        ({"num_cpus": 1.5}, "resources.num_cpus", "whole number"),
        ({"memory": "2 gigs"}, "resources.memory", "not a size"),
        ({"memory": -1}, "resources.memory", "greater than 0"),
        ({"cpus": 2}, "resources.cpus", "unknown key"),
    ],
)
def test_bad_resources_name_the_key(tmp_path, resources, key, problem):
    with pytest.raises(ParamsError, match=rf"key '{re.escape(key)}'.*{problem}"):
        load_batch(write(tmp_path, {"resources": resources, "runs": [{"notebook": "nb"}]}))
    with pytest.raises(ParamsError, match=rf"key 'runs\.0\.{re.escape(key)}'.*{problem}"):
        load_batch(write(tmp_path, {"runs": [{"notebook": "nb", "resources": resources}]}))


def test_set_parses_yaml_values_and_rejects_garbage():
    assert parse_set_overrides(["a.b=3", "a.c=[1, 2]", "d=true"]) == {"a": {"b": 3, "c": [1, 2]}, "d": True}
    with pytest.raises(ParamsError, match="expected key.sub=value"):
        parse_set_overrides(["novalue"])


def test_settings_hash_tracks_every_change():
    base = validate_settings({}, "x")
    assert settings_hash(base) == settings_hash(validate_settings({}, "y"))
    assert settings_hash(base) != settings_hash(validate_settings({"llm": {"top_p": 0.5}}, "x"))


# ---------------------------------------------------------------- moved keys


def test_a_moved_key_names_the_file_and_its_new_place(tmp_path):
    path = write(tmp_path, {"runs": [{"notebook": "nb", "settings": {"qa": {"map_budget": 3000}}}]})
    with pytest.raises(
        ParamsError, match=r"batch\.yaml.*key 'qa\.map_budget' moved to 'methods\.map_budget'"
    ):
        load_batch(path)
    path = write(tmp_path, {"settings": {"questions": {"link_threshold": 0.9}}, "runs": [{"notebook": "nb"}]})
    with pytest.raises(
        ParamsError, match=r"key 'questions\.link_threshold' moved to 'retrieval\.link_threshold'"
    ):
        load_batch(path)
    with pytest.raises(
        ParamsError, match=r"batch\.yaml.*key 'judge\.map_budget' moved to 'methods\.map_budget'"
    ):
        load_batch(path, parse_set_overrides(["judge.map_budget=8000"]))
    with pytest.raises(ParamsError, match=r"key 'claims\.baseline' was removed: .*not a baseline"):
        validate_settings({"claims": {"baseline": "naive_rag"}}, "x")


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_KEYS.items()))
def test_every_moved_key_fails_and_its_new_place_takes_the_value(old, new):
    value = functools.reduce(getattr, new.split("."), Settings())
    with pytest.raises(ParamsError, match=rf"key '{re.escape(old)}' moved to '{re.escape(new)}'"):
        validate_settings(dotted_to_nested(old, value), "x")
    assert validate_settings(dotted_to_nested(new, value), "x") == Settings()


def test_removed_keys_are_unknown_now():
    for old in REMOVED_KEYS:
        with pytest.raises(ParamsError, match=rf"key '{re.escape(old)}' was removed"):
            validate_settings(dotted_to_nested(old, "naive_rag"), "x")


def test_moved_keys_kept_their_defaults():
    assert Settings().methods.model_dump() == {
        "graph_method": "local_search",
        "global_level": 0,
        "map_budget": 1500,
        "map_max_tokens": 128,
        "map_max_points": 2,
        "map_point_max_chars": 160,
        "answer_files": {},
    }
    retrieval = Settings().retrieval
    assert (retrieval.entity_max_tokens, retrieval.link_threshold, retrieval.ngram_max) == (48, 0.85, 4)


# ---------------------------------------------------------------- one definition per key, each described


def section_classes(section: type[Section] = Settings) -> list[type[Section]]:
    nested = [f.annotation for f in section.model_fields.values() if isinstance(f.annotation, type)]
    return [section] + [c for n in nested if issubclass(n, Section) for c in section_classes(n)]


def test_every_key_and_section_is_described():
    rows = describe_settings()
    assert [r.key for r in rows if not r.description.strip()] == []
    assert [c.__name__ for c in section_classes() if not (vars(c).get("__doc__") or "").strip()] == []


def test_linking_and_method_building_keys_live_in_one_section():
    rows = [r.key for r in describe_settings() if r.default is not None]
    linking = [
        k for k in rows if k.rpartition(".")[2] in ("entity_max_tokens", "link_threshold", "ngram_max")
    ]
    assert linking == ["retrieval.entity_max_tokens", "retrieval.link_threshold", "retrieval.ngram_max"]
    building = ("graph_method", "global_level", "map_budget", "map_max_tokens", "map_max_points")
    assert [k for k in rows if k.rpartition(".")[2] in building] == [f"methods.{k}" for k in building]
    assert [k for k in rows if k.endswith(".baseline")] == ["qa.baseline", "summarization.baseline"]


# Names that mean another thing in each section they appear in: another endpoint, another model
# call, another sample, a caller's count beside retrieval's default, or another use of the index's
# graphs (questions are sampled from one graph; retrievers walk one or every graph), or an upstream
# system's own parameter of that name (systems.*: GraphRAG's chunk size, fast-graphrag's entity types),
# or another database (the response cache's and the index store's `url`, `password_env`; LightRAG's
# graph and the Cypher store's `graph`).
PER_SECTION_NAMES = {
    "runs",  # the verdict's combined runs, the comparison's compared runs, the sweep's points
    "notebook",  # whose batch runs the comparison compares, whose batch runs the sweep reads
    "url",
    "password_env",
    "graph",
    "chunk_size",
    "community_level",
    "entity_types",
    "response_type",
    "timeout_s",
    "api_key_env",
    "backend",
    "base_url",
    "extraction_max_tokens",
    "graph_origin",
    "k",
    "max_tokens",
    "model",
    "question_source",
    # the retrieval benchmark's own sample of a data set's questions (no answers, so no AnswerSettings)
    "question_types",
    "questions_per_type",
    "seed",
    "summary_max_tokens",
    "temperature",
}


def test_a_key_in_several_sections_is_one_definition_of_a_shared_base():
    holders: dict[str, list[type[Section]]] = {}
    for section in section_classes():
        for name, field in section.model_fields.items():
            if not (isinstance(field.annotation, type) and issubclass(field.annotation, Section)):
                holders.setdefault(name, []).append(section)
    for name, sections in holders.items():
        if len(sections) == 1 or name in PER_SECTION_NAMES:
            continue
        shared = [
            base
            for base in sections[0].__mro__
            if isinstance(base, type) and issubclass(base, Section) and name in base.model_fields
        ]
        assert any(all(issubclass(s, base) for s in sections) for base in shared), name


def test_settings_command_prints_every_key(capsys):
    assert main(["settings", "retrieval"]) == 0
    out = capsys.readouterr().out
    assert "retrieval.link_threshold  float (> 0, <= 1) = 0.85\n    name-embedding cosine" in out
    assert "qa." not in out
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{r.key}  " in f"\n{out}" for r in describe_settings())
    assert main(["settings", "nope"]) == 2
    assert "no settings key or section 'nope'" in capsys.readouterr().err


def test_diagnostics_thresholds_name_the_seed_categories_and_are_shares():
    from ragtrial.config.diagnostics import DiagnosticsSettings

    with pytest.raises(ValueError, match="unknown categories summary"):
        DiagnosticsSettings(entity_recall_thresholds={"summary": 0.5})
    with pytest.raises(ValueError, match="less than or equal to 1"):
        DiagnosticsSettings(entity_recall_thresholds={"temporal": 1.5})
    with pytest.raises(ValueError, match="categories"):
        DiagnosticsSettings(categories={"2hop": "two_hop"})


def test_settings_from_lays_the_batch_over_shared_fragments_in_order(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "q.yaml").write_text(
        "settings:\n  questions: {per_level: 50, min_hops: 50}\n  judge: {trials: 4}\n"
    )
    (tmp_path / "shared" / "more.yaml").write_text("settings:\n  questions: {min_hops: 40}\n")
    batch = tmp_path / "b.yaml"
    batch.write_text(
        "settings_from: [shared/q.yaml, shared/more.yaml]\n"
        "settings: {judge: {trials: 2}}\n"
        "runs:\n  - notebook: 06_judge_bias_audit\n  - notebook: 07_pairwise_method_comparison\n"
        "    settings: {questions: {per_level: 3}}\n"
    )
    specs, _ = load_batch(batch)
    q0, q1 = (s.settings.questions for s in specs)
    assert (q0.per_level, q0.min_hops, specs[0].settings.judge.trials) == (50, 40, 2)
    assert (q1.per_level, q1.min_hops) == (3, 40)
    batch.write_text("settings_from: [shared/none.yaml]\nruns:\n  - notebook: 06_judge_bias_audit\n")
    with pytest.raises(ParamsError, match="settings_from.0"):
        load_batch(batch)
    (tmp_path / "shared" / "runs.yaml").write_text("runs:\n  - notebook: 06_judge_bias_audit\n")
    batch.write_text("settings_from: [shared/runs.yaml]\nruns:\n  - notebook: 06_judge_bias_audit\n")
    with pytest.raises(ParamsError, match="runs"):  # a fragment is settings only
        load_batch(batch)


@pytest.mark.parametrize(
    ("overrides", "key", "backend"),
    [
        (["llm.base_url=http://127.0.0.1:9/v1"], "llm.base_url", "embedded"),
        (["embeddings.base_url=http://127.0.0.1:9/v1"], "embeddings.base_url", "local"),
    ],
)
def test_an_endpoint_url_on_a_local_backend_is_refused_not_ignored(tmp_path, overrides, key, backend):
    # a batch that sets no backend (seed_stores.yaml) given an endpoint on the command line: the local
    # model would otherwise answer under the endpoint's model name (the dress rehearsal's first leg did)
    path = write(tmp_path, {"runs": [{"notebook": "nb"}]})
    with pytest.raises(ParamsError, match=rf"key '{re.escape(key)}'.*backend {backend}"):
        load_batch(path, parse_set_overrides(overrides))
    section = key.split(".")[0]
    fixed = [*overrides, f"{section}.backend=openai_compatible"]
    (spec,), _ = load_batch(path, parse_set_overrides(fixed))
    assert getattr(spec.settings, section).base_url == "http://127.0.0.1:9/v1"
