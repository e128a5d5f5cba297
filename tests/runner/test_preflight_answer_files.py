"""The preflight accepts imported method names and reads each answers file before any run starts."""

from __future__ import annotations

import pytest
from conftest import PROJECT_ROOT

from ragtrial.config.base import ParamsError
from ragtrial.config.settings import Settings
from ragtrial.runner.preflight import check_settings


def settings_with(answer_file: dict, methods: list[str]) -> Settings:
    return Settings(methods={"answer_files": {"mine": answer_file}}, judge={"methods": methods})


def test_an_imported_name_is_a_known_method_and_its_file_is_read(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"question_id": "q1", "answer": "x"}\n')
    check_settings(settings_with({"path": str(path)}, ["mine", "naive_rag"]), "batch.yaml", PROJECT_ROOT)


def test_a_missing_answers_file_fails_the_preflight_naming_the_key(tmp_path):
    with pytest.raises(
        ParamsError, match=r"key 'methods.answer_files.mine': file .*absent.jsonl: answers file not found"
    ):
        check_settings(
            settings_with({"path": str(tmp_path / "absent.jsonl")}, ["mine"]), "batch.yaml", PROJECT_ROOT
        )


def test_a_malformed_answers_file_fails_the_preflight_naming_line_and_field(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"question_id": "q1", "answer": "x"}\n{"question_id": "q1", "answer": "y"}\n')
    with pytest.raises(ParamsError, match=r"record line 2, field 'question_id': duplicate answer"):
        check_settings(settings_with({"path": str(path)}, ["mine"]), "batch.yaml", PROJECT_ROOT)


def test_an_import_cannot_take_a_kit_method_name(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"question_id": "q1", "answer": "x"}\n')
    settings = Settings(methods={"answer_files": {"naive_rag": {"path": str(path)}}})
    with pytest.raises(ParamsError, match="'naive_rag' is a method of the kit"):
        check_settings(settings, "batch.yaml", PROJECT_ROOT)
