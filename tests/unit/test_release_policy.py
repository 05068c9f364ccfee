"""Precedence and moving-tag rules (Semantic Versioning 2.0.0 §11)."""

from __future__ import annotations

import pytest
import semver

from paddlecd.errors import ConfigError
from paddlecd.release.policy import (
    Action,
    HistoryNeeded,
    State,
    bump,
    fold,
    moving_tags,
    parse_release_tag,
    parse_version,
    release_tag,
)

V = semver.Version.parse
D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


# --------------------------------------------------------------------------- §11 precedence

@pytest.mark.parametrize(
    "lower, higher",
    [
        ("1.0.0", "2.0.0"),
        ("2.0.0", "2.1.0"),
        ("2.1.0", "2.1.1"),  # 11.2: major, minor, patch
        ("1.9.0", "1.10.0"),
        ("1.0.9", "1.0.10"),
        ("9.0.0", "10.0.0"),  # numerically, not as strings
        ("1.0.0-alpha", "1.0.0"),
        ("1.5.0-rc.1", "1.5.0"),  # 11.3: pre-release < release
        ("1.0.0-alpha", "1.0.0-alpha.1"),  # 11.4.4: more fields is higher
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),  # 11.4.3: numeric < alphanumeric
        ("1.0.0-alpha.beta", "1.0.0-beta"),
        ("1.0.0-beta", "1.0.0-beta.2"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),  # 11.4.1: numeric identifiers as numbers
        ("1.0.0-beta.11", "1.0.0-rc.1"),  # 11.4.2: ASCII order of alphanumerics
        ("1.0.0-rc.1", "1.0.0-rc.1a"),
    ],
)
def test_precedence(lower, higher):
    assert parse_version(lower) < parse_version(higher)


def test_equal_versions_compare_equal():
    assert parse_version("1.4.0") == parse_version("1.4.0")


# --------------------------------------------------------------------------- parsing

@pytest.mark.parametrize("bad, words", [
    ("v1.4", "no 'v' prefix"), ("V1.4.0", "no 'v' prefix"), ("1.4", "MAJOR.MINOR.PATCH"),
    ("01.2.3", "leading zeros"), ("1.02.3", "leading zeros"), ("1.4.0+build.5", "build metadata"),
    ("", "MAJOR.MINOR.PATCH"), ("1.4.0-", "empty pre-release"), ("latest", "MAJOR.MINOR.PATCH"),
])
def test_invalid_versions_rejected_with_hint(bad, words):
    with pytest.raises(ConfigError, match=words) as info:
        parse_version(bad)
    assert "X.Y.Z" in info.value.hint or "drop" in info.value.hint


@pytest.mark.parametrize("bad, part", [
    ("1.0.0-rc..1", "''"), ("1.0.0-01", "'01'"), ("1.0.0-rc.\u00fc", "'\u00fc'"),
])
def test_bad_prerelease_named_not_the_core(bad, part):
    """A valid X.Y.Z core with a bad pre-release: the message names the pre-release identifier,
    not "MAJOR.MINOR.PATCH" (which sent a user looking at the wrong part)."""
    with pytest.raises(ConfigError) as info:
        parse_version(bad)
    assert "MAJOR.MINOR.PATCH" not in info.value.cause
    assert f"pre-release identifier {part}" in info.value.cause


def test_tags_for_release_and_prerelease():
    assert release_tag(V("1.4.0"), "cu126") == "1.4.0-cu126"
    assert moving_tags(V("1.4.0"), "cu126") == ["1.4-cu126", "1-cu126", "latest-cu126"]
    assert release_tag(V("1.5.0-rc.1"), "cpu") == "1.5.0-rc.1-cpu"
    assert moving_tags(V("1.5.0-rc.1"), "cpu") == []


@pytest.mark.parametrize(
    "tag, variant, version",
    [
        ("1.4.0-cpu", "cpu", "1.4.0"),
        ("1.5.0-rc.1-cu126", "cu126", "1.5.0-rc.1"),
        ("2.0.0-cu120-p261", "cu120-p261", "2.0.0"),
        ("1.4-cpu", "cpu", None),
        ("latest-cpu", "cpu", None),
        ("1.4.0-cu126", "cpu", None),
        ("cpu-1a2b3c4", "cpu", None),
    ],
)
def test_parse_release_tag(tag, variant, version):
    got = parse_release_tag(tag, variant)
    assert (str(got) if got else None) == version


@pytest.mark.parametrize("existing, part, expected", [
    ([], "patch", "0.0.1"), ([], "minor", "0.1.0"), ([], "major", "1.0.0"),
    (["1.3.2", "1.10.0", "1.9.9"], "patch", "1.10.1"), (["1.3.2", "1.10.0"], "minor", "1.11.0"),
    (["1.3.2", "1.10.0"], "major", "2.0.0"), (["1.4.0", "2.0.0-rc.1"], "major", "2.0.0"),
    (["1.4.0", "1.5.0-rc.1"], "minor", "1.5.0"),
])
def test_bump_from_highest_release(existing, part, expected):
    assert str(bump([V(e) for e in existing], part)) == expected


def test_bump_rejects_unknown_part():
    with pytest.raises(ConfigError, match="--bump"):
        bump([], "micro")


# --------------------------------------------------------------------------- moving tags (fold)

def _promote(version, digest, key):
    return Action("promote", V(version), digest, key)


def test_moving_tags_follow_a_release():
    state = fold([_promote("1.4.0", D1, "a")], "cpu")
    assert {t: str(v) for t, v in state.moving.items()} == {
        "1.4-cpu": "1.4.0",
        "1-cpu": "1.4.0",
        "latest-cpu": "1.4.0",
    }
    assert state.digest_of("latest-cpu") == D1


def test_out_of_order_promotions_end_on_highest():
    state = fold(
        [_promote("1.10.0", D1, "a"), _promote("1.9.0", D2, "b"), _promote("1.4.2", D3, "c")], "cpu"
    )
    assert state.moving["latest-cpu"] == V("1.10.0") and state.moving["1-cpu"] == V("1.10.0")
    assert state.moving["1.9-cpu"] == V("1.9.0") and state.moving["1.4-cpu"] == V("1.4.2")


def test_moving_tags_only_move_forward_within_a_series():
    state = fold([_promote("1.4.3", D1, "a"), _promote("1.4.1", D2, "b")], "cpu")
    assert state.moving["1.4-cpu"] == V("1.4.3")


def test_prerelease_never_moves_a_moving_tag():
    state = fold(
        [
            _promote("1.4.0", D1, "a"),
            _promote("1.5.0-rc.1", D2, "b"),
            _promote("2.0.0-rc.1", D3, "c"),
        ],
        "cpu",
    )
    assert state.moving == {"1.4-cpu": V("1.4.0"), "1-cpu": V("1.4.0"), "latest-cpu": V("1.4.0")}
    assert state.releases[V("1.5.0-rc.1")] == D2


def test_clobbering_claim_is_void_and_same_digest_is_idempotent():
    state = fold(
        [_promote("1.4.0", D1, "a"), _promote("1.4.0", D2, "b"), _promote("1.4.0", D1, "c")], "cpu"
    )
    assert state.releases[V("1.4.0")] == D1 and state.void == ["b"]


def test_order_is_by_key_not_by_arrival():
    state = fold([_promote("1.4.0", D2, "b"), _promote("1.4.0", D1, "a")], "cpu")
    assert state.releases[V("1.4.0")] == D1 and state.void == ["b"]


def test_rollback_moves_back_then_promotions_move_forward_from_there():
    actions = [
        _promote("1.3.2", D1, "a"),
        _promote("1.4.0", D2, "b"),
        Action("rollback", V("1.3.2"), D1, "c"),
    ]
    state = fold(actions, "cpu")
    assert state.moving["latest-cpu"] == V("1.3.2") and state.moving["1-cpu"] == V("1.3.2")
    assert state.moving["1.4-cpu"] == V("1.4.0")  # not a moving tag of 1.3.2: untouched
    state = fold([*actions, _promote("1.3.3", D3, "d")], "cpu")
    assert state.moving["latest-cpu"] == V("1.3.3")


def test_rollback_to_unknown_or_prerelease_is_void():
    state = fold([_promote("1.4.0", D1, "a"), Action("rollback", V("1.3.0"), D2, "b")], "cpu")
    assert state.void == ["b"] and state.moving["latest-cpu"] == V("1.4.0")


# --------------------------------------------------------------------------- fold from a state

def _partial(state):
    """What a ledger checkpoint's state layer keeps of ``state`` (ledger._state_blob)."""
    named = set(state.moving.values())
    return State(releases={v: d for v, d in state.releases.items() if v in named},
                 moving=dict(state.moving), claimed=frozenset(state.releases))


HISTORY = [("promote", "1.4.0", D1), ("promote", "1.5.0", D2), ("promote", "1.4.1", D3),
           ("rollback", "1.4.1", D3), ("promote", "2.0.0-rc.1", D1), ("promote", "1.6.0", D2)]


@pytest.mark.parametrize("split", range(1, len(HISTORY)))
def test_a_fold_from_a_partial_state_equals_the_whole_fold(split):
    actions = [Action(k, V(v), d, f"k{i}") for i, (k, v, d) in enumerate(HISTORY)]  # type: ignore[arg-type]
    whole = fold(actions, "cpu")
    start = _partial(fold(actions[:split], "cpu"))
    later = fold(actions[split:], "cpu", start=start)
    assert later.moving == whole.moving
    assert {later.digest_of(t) for t in later.moving} == {whole.digest_of(t) for t in whole.moving}
    assert set(later.releases) | later.claimed == set(whole.releases)


def test_a_version_known_only_as_claimed_needs_the_history():
    start = _partial(fold([_promote("1.4.0", D1, "a"), _promote("1.4.1", D2, "b")], "cpu"))
    assert V("1.4.0") in start.claimed and V("1.4.0") not in start.releases
    with pytest.raises(HistoryNeeded):
        fold([Action("rollback", V("1.4.0"), D1, "c")], "cpu", start=start)
    with pytest.raises(HistoryNeeded):
        fold([_promote("1.4.0", D3, "c")], "cpu", start=start)  # a clobber: the claim decides
    assert fold([_promote("1.6.0", D3, "c")], "cpu", start=start).digest_of("latest-cpu") == D3


@pytest.mark.parametrize(("call", "fragment"), [
    (lambda s, plan: plan.plan_promotion(s, variant="cpu", version="1.0.0-cpu"),
     "--version 1.0.0-cpu: 'cpu' is a variant, and 1.0.0-cpu the name of release 1.0.0 of it"),
    (lambda s, plan: plan.plan_promotion(s, variant="cpu", version="1.0.0-rc.1-cu126"),
     "'cu126' is a variant"),
    (lambda s, plan: plan.plan_rollback(s, variant="cpu", to="0.3.2-cpu"),
     "--to 0.3.2-cpu: 'cpu' is a variant"),
    # trial 8: the variant in capitals made the tag 1.0.0-CPU-cpu
    (lambda s, plan: plan.plan_promotion(s, variant="cpu", version="1.0.0-CPU"),
     "--version 1.0.0-CPU: 'cpu' is a variant, and 1.0.0-CPU the name of release 1.0.0 of it"),
])
def test_a_release_name_given_as_a_version_is_refused_before_any_registry(tmp_path, call,
                                                                           fragment):
    """Trial 7: ``promote --version 1.0.0-cpu`` planned the tag 1.0.0-cpu-cpu (and 1.0.0-cu126
    made 1.0.0-cu126-cpu for a CPU image); ``rollback --to 0.3.2-cpu`` called it a
    pre-release. No registry runs on 127.0.0.1:9: the refusal comes first."""
    from paddlecd import config
    from paddlecd.errors import ConfigError
    from paddlecd.release import plan

    from support import ROOT

    s = config.load({"state_dir": str(tmp_path), "registry.url": "127.0.0.1:9"}, root=ROOT,
                    environ={})
    with pytest.raises(ConfigError) as e:
        call(s, plan)
    assert fragment in e.value.cause and "give the version alone" in e.value.hint
