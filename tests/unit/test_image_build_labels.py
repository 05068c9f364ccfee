"""``invoke build --label KEY=VALUE``: labels of one's own, never one paddlecd sets itself."""

from __future__ import annotations

import pytest

from paddlecd.errors import ConfigError
from paddlecd.image.build import parse_labels

OWN = {"io.paddlecd.variant": "cpu", "org.opencontainers.image.revision": "abc"}


def test_labels_of_ones_own_are_added_as_given():
    assert parse_labels(["org.example.ticket=REL-42", "org.example.empty=", "a=b=c"], OWN) == {
        "org.example.ticket": "REL-42", "org.example.empty": "", "a": "b=c"}


@pytest.mark.parametrize(("item", "words"), [
    ("no-equals", "not KEY=VALUE"),
    ("=value", "not KEY=VALUE"),
    (" org.example.x=1", "not KEY=VALUE"),
    ("io.paddlecd.variant=gpu", "paddlecd sets io.paddlecd.variant itself"),
    # trial 7: these reached the builder, which refused them (exit 4, logs written)
    ("bad key=v", "the key holds white space"), ("org.x\tkey=v", "the key holds white space"),
    ("org.x=a\0b", "a NUL byte"),
])
def test_a_bad_label_is_refused_naming_it(item, words):
    with pytest.raises(ConfigError) as e:
        parse_labels([item], OWN)
    assert words in e.value.cause and repr(item) in e.value.cause and e.value.hint


def test_a_label_key_given_twice_with_two_values_is_refused():
    """Trial 9: ``--label k=v --label k=w`` built with k=w, the first value dropped unsaid."""
    with pytest.raises(ConfigError, match="--label k is given twice \\('v' and 'w'\\)"):
        parse_labels(["k=v", "k=w"], OWN)
    assert parse_labels(["k=v", "k=v"], OWN) == {"k": "v"}  # the same twice: one label


def test_a_control_character_in_a_label_key_is_refused():
    """Trial 10: ``--label $'k\\x1b=v'`` built an image with the label key ``k\\u001b``."""
    with pytest.raises(ConfigError, match="control character"):
        parse_labels(["k\x1b=v"], OWN)


@pytest.mark.parametrize("url", ["https://x-access-token:ghp_SECRET@github.com/o/r",
                                 "https://ghp_SECRET@github.com/o/r"])
def test_a_source_url_with_a_token_never_reaches_the_label(settings, monkeypatch, url):
    """Trial 11: ``PADDLECD_SOURCE_URL=https://x-access-token:<token>@github.com/o/r`` went into
    the image's org.opencontainers.image.source label as given (a push publishes it)."""
    from paddlecd.image import lock, variants
    from paddlecd.image.build import labels_for

    v = variants.get(settings, "cpu")
    entry = lock.LockEntry("cpu", v.base, "sha256:" + "a" * 64,
                           "application/vnd.oci.image.manifest.v1+json", "2026-12-03T00:00:00Z")
    monkeypatch.setenv("PADDLECD_SOURCE_URL", url)
    with pytest.raises(ConfigError, match="carries a user or password") as e:
        labels_for(settings, v, entry)
    assert "SECRET" not in e.value.cause + e.value.hint
    monkeypatch.setenv("PADDLECD_SOURCE_URL", "https://github.com/o/r")
    assert labels_for(settings, v, entry)["org.opencontainers.image.source"] == \
        "https://github.com/o/r"


@pytest.mark.parametrize("url", ["not a url", "https://github.com/x/y\nz", "github.com/x/y"])
def test_a_source_url_that_is_no_url_never_reaches_the_label(settings, monkeypatch, url):
    """Trial 13: 'not a url' and a URL with a newline became the image's source label."""
    from paddlecd.image import lock, variants
    from paddlecd.image.build import labels_for

    v = variants.get(settings, "cpu")
    entry = lock.LockEntry("cpu", v.base, "sha256:" + "a" * 64,
                           "application/vnd.oci.image.manifest.v1+json", "2026-12-03T00:00:00Z")
    monkeypatch.setenv("PADDLECD_SOURCE_URL", url)
    with pytest.raises(ConfigError, match="PADDLECD_SOURCE_URL .* is not a URL"):
        labels_for(settings, v, entry)
