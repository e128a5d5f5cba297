import pytest
import yaml

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import load_batch, parse_set_overrides, settings_hash
from ragtrial.config.settings import validate_settings


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
    specs, workers = load_batch(path, parse_set_overrides(["llm.seed=9"]))
    assert workers == 1 and len(specs) == 4
    assert {(s.settings.llm.temperature, s.settings.data.seed) for s in specs} == {
        (0.0, 1),
        (0.0, 2),
        (0.5, 1),
        (0.5, 2),
    }
    assert all(s.settings.llm.max_tokens == 60 and s.settings.llm.seed == 9 for s in specs)
    assert len({s.run_id for s in specs}) == 4  # each grid point is its own run


def test_set_parses_yaml_values_and_rejects_garbage():
    assert parse_set_overrides(["a.b=3", "a.c=[1, 2]", "d=true"]) == {"a": {"b": 3, "c": [1, 2]}, "d": True}
    with pytest.raises(ParamsError, match="expected key.sub=value"):
        parse_set_overrides(["novalue"])


def test_settings_hash_tracks_every_change():
    base = validate_settings({}, "x")
    assert settings_hash(base) == settings_hash(validate_settings({}, "y"))
    assert settings_hash(base) != settings_hash(validate_settings({"llm": {"top_p": 0.5}}, "x"))
