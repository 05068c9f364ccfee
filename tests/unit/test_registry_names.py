"""Repository names and tags against the distribution spec's grammar, refused before any request:
the rule is the hint, not "rebuild"."""

from __future__ import annotations

import pytest

from paddlecd.config import load
from paddlecd.errors import ConfigError
from paddlecd.image.push import check_writable
from paddlecd.registry.reference import check_repository, check_tag, parse_reference


@pytest.mark.parametrize("name", ["ml/paddle", "a", "a.b/c_d/e__f/g--h", "x0/1y"])
def test_valid_repository_names(name):
    assert check_repository(name) == name


@pytest.mark.parametrize("name, why", [
    ("ML/Paddle", "capitals"), ("ml/-paddle", ""), ("ml//paddle", ""), ("ml/paddle/", ""),
    ("ml/pa___ddle", ""), ("ml/pa ddle", ""), ("a" * 256, ""), ("", ""),
])
def test_invalid_repository_names_get_the_rule(name, why):
    with pytest.raises(ConfigError, match="not a valid repository name") as info:
        check_repository(name)
    assert why in info.value.cause and "distribution-spec name grammar" in info.value.hint


def test_settings_with_a_bad_repository_are_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match="'registry.repository' 'ML/Paddle'.*capitals") as info:
        load({"registry.repository": "ML/Paddle"}, root=tmp_path, environ={})
    assert "rebuild" not in info.value.hint and "lower-case" in info.value.hint
    with pytest.raises(ConfigError, match="release.repository"):
        load(root=tmp_path, environ={"PADDLECD_RELEASE_REPOSITORY": "rel/Ease"})


def test_reference_with_capitals_names_the_rule():
    with pytest.raises(ConfigError, match="capitals") as info:
        parse_reference("127.0.0.1:5000/ML/paddle:cpu")
    assert "lower-case" in info.value.hint


@pytest.mark.parametrize("tag", ["a", "_x", "1.4.0-cpu", "A" * 128, "latest-cu126"])
def test_valid_tags(tag):
    assert check_tag(tag) == tag


@pytest.mark.parametrize("tag", ["", "-x", ".x", "a+b", "a/b", "A" * 129, "é"])
def test_invalid_tags_get_the_rule(tag):
    with pytest.raises(ConfigError, match="not a valid image tag") as info:
        check_tag(tag)
    assert "[A-Za-z0-9_][A-Za-z0-9._-]{0,127}" in info.value.hint


def test_check_writable_names_the_folder(tmp_path):
    check_writable(tmp_path / "new" / "candidates")  # created
    made = tmp_path / "new" / "candidates"
    assert made.is_dir() and not list(made.iterdir())
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=f"cannot write to the state folder {tmp_path / 'file'}"):
        check_writable(tmp_path / "file" / "candidates")


@pytest.mark.parametrize("text", ["sha256:" + "a" * 64, "sha256:" + "a" * 63, "sha256:"])
def test_a_bare_digest_is_named_as_one_without_its_repository(text):
    """A trial: verify/deploy --image sha256:… said "is a tag, not a digest" or tried the hub."""
    from paddlecd.errors import ConfigError
    from paddlecd.registry.reference import parse_reference

    with pytest.raises(ConfigError, match="is a digest without its repository"):
        parse_reference(text)


def test_a_huge_repository_or_tag_is_quoted_by_its_head_and_length():
    """Trial 16: a 200,000-character registry.repository was quoted for 936 characters."""
    from paddlecd.errors import ConfigError

    for check, value in ((check_repository, "A" * 200_000), (check_tag, "t" * 200_000)):
        try:
            check(value)
        except ConfigError as e:
            assert len(e.cause) < 260 and "(200000 characters)" in e.cause, e.cause
        else:
            raise AssertionError(f"{check.__name__} took it")
