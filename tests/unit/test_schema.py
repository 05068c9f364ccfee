"""The shared schema-error translation (paddlecd.schema) used by variants, job and pipeline
files."""

import pytest

from paddlecd import schema as validation
from paddlecd.errors import ConfigError, PipelineError
from paddlecd.pipeline.spec import schema as pipeline_schema


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(ConfigError) as e:
        validation.check(
            {
                "variants": {
                    "cpu": {"device": "cpu", "base": "r/p:3.0.0", "paddle": "3.0.0", "bootstrp": {}}
                }
            },
            "variants.schema.json",
            source="v.yaml",
        )
    assert (
        e.value.cause == "v.yaml: unknown key 'bootstrp' at variants.cpu"
        and e.value.hint == "did you mean 'bootstrap'?"
    )


def test_a_key_that_is_no_name_is_described_not_quoted():
    """A re-trial: ``deploy --job /etc/shadow`` printed a line of it back as the unknown key."""
    line = "root:$y$j9T$secrethash:20228:0:99999:7:"
    with pytest.raises(ConfigError) as e:
        validation.check({line: None}, "train.schema.json", source="/etc/shadow")
    assert "secrethash" not in e.value.cause
    assert e.value.cause.startswith("/etc/shadow: unknown key of 39 characters that is no key")


def test_enum_value_suggests_and_lists_the_options():
    with pytest.raises(PipelineError) as e:
        validation.check(
            {"schema": 1, "stages": [{"stage": "biuld"}]},
            "pipeline.schema.json",
            source="p.yaml",
            error=PipelineError,
            schema=pipeline_schema(),
        )
    assert "unknown stage 'biuld' at stages[0].stage" in e.value.cause and e.value.hint.startswith(
        "did you mean 'build'? stage is one of: lock-check, build,"
    )  # not "stages: …" made from the key (a key "status" gave "statuss", trial 8)


def test_other_violations_point_at_the_schema():
    with pytest.raises(ConfigError) as e:
        validation.check({"variants": {}}, "variants.schema.json", source="v.yaml")
    assert e.value.cause.startswith("v.yaml: variants: ") and "variants.schema.json" in e.value.hint


def test_valid_document_passes():
    validation.check(
        {"variants": {"cpu": {"device": "cpu", "base": "r/p:3.0.0", "paddle": "3.0.0"}}},
        "variants.schema.json",
        source="v.yaml",
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), True])
def test_a_number_is_finite_as_json_has_it(value):
    """RFC 8259 §6 has no NaN or Infinity; YAML's .nan and Python's json give them, and NaN
    passes every minimum (trial 13: a check stage's rtol: .nan loaded)."""
    schema = {"type": "object", "properties": {"rtol": {"type": "number", "minimum": 0}}}
    with pytest.raises(ConfigError, match="rtol"):
        validation.check({"rtol": value}, "t.json", schema=schema, source="t.yaml")
    validation.check({"rtol": 10 ** 400}, "t.json", schema=schema, source="t.yaml")
