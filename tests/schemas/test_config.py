from __future__ import annotations

import pytest

from schemas.config import ConfigError, PipelineConfig, load_config


def test_defaults_without_a_file():
    assert load_config(None) == PipelineConfig()


def test_toml_and_yaml_give_the_same_configuration(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("[filters]\nmin_chars = 12\n[publish]\nmax_rows_per_shard = 500\n")
    yaml = tmp_path / "c.yaml"
    yaml.write_text("filters:\n  min_chars: 12\npublish:\n  max_rows_per_shard: 500\n")
    assert load_config(toml) == load_config(yaml)
    assert load_config(toml).filters.min_chars == 12


def test_invalid_field_names_field_and_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[filters]\nmin_chars = "many"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid configuration")
    assert "field 'filters.min_chars'" in message
    assert "\n" not in message  # one clear line


def test_unknown_field_rejected(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text("[filters]\nmin_char = 3\n")
    with pytest.raises(
        ConfigError, match=r"unknown key 'filters.min_char' \(did you mean 'min_chars'\?\)"
    ):
        load_config(path)


def test_syntax_error_names_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[filters\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: not valid TOML"):
        load_config(path)


def test_config_hash_changes_with_content():
    assert PipelineConfig().config_hash() == PipelineConfig().config_hash()
    changed = PipelineConfig.model_validate({"filters": {"min_chars": 99}})
    assert changed.config_hash() != PipelineConfig().config_hash()
