"""The ledger's pure parts: record order, checkpoint parsing, when a checkpoint is due, tags."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json

import pytest
import semver

from paddlecd.errors import ConfigError
from paddlecd.release import ledger
from paddlecd.release.plan import check_tags


def _record(variant: str = "cpu", day: int = 1, version: str = "1.0.0") -> ledger.Record:
    when = dt.datetime(2025, 1, day, tzinfo=dt.timezone.utc)
    return ledger.Record(
        id=ledger.new_id(variant, when),
        action="promote",
        variant=variant,
        version=version,
        digest="sha256:" + "a" * 64,
        source="s",
        target="t",
    )


def _blob(doc: dict) -> tuple[bytes, str]:
    body = gzip.compress(json.dumps(doc).encode())
    return body, "sha256:" + hashlib.sha256(body).hexdigest()


def test_record_ids_are_in_time_order_and_per_variant():
    late, early, other = _record(day=3), _record(day=1), _record("cu126", day=2)
    tags = [late.id, "latest-cpu", other.id, ledger.checkpoint_tag("cpu"), early.id, "1.0.0-cpu"]
    assert ledger.record_ids(tags, "cpu") == [early.id, late.id]
    assert ledger.variants_in(tags) == ["cpu", "cu126"]
    assert not ledger.record_ids([ledger.checkpoint_tag("cpu")])  # never mistaken for a record


def test_checkpoint_parse_round_trip_and_refusals():
    records = [_record(day=1), _record(day=2, version="1.1.0")]
    body, digest = _blob(
        {"schema": 1, "variant": "cpu", "records": [json.loads(r.to_json()) for r in records]}
    )
    assert list(ledger._parse_checkpoint(body, digest, "cpu").values()) == records
    with pytest.raises(ValueError, match="does not match its digest"):
        ledger._parse_checkpoint(body + b"x", digest, "cpu")
    with pytest.raises(ValueError, match="checkpoint of 'cpu'"):
        ledger._parse_checkpoint(body, digest, "cu126")
    body, digest = _blob(
        {"schema": 1, "variant": "cpu", "records": [json.loads(_record("cu126").to_json())]}
    )
    with pytest.raises(ValueError, match="another variant"):
        ledger._parse_checkpoint(body, digest, "cpu")


@pytest.mark.parametrize(
    "fetched, dropped, due",
    [
        (0, 0, False),
        (ledger.CHECKPOINT_EVERY - 1, 0, False),
        (ledger.CHECKPOINT_EVERY, 0, True),
        (0, 1, True),
    ],
)
def test_a_checkpoint_is_due_after_enough_records_or_a_dropped_one(fetched, dropped, due):
    view = ledger.View(variant="cpu", records=(_record(),), fetched=fetched, dropped=dropped)
    assert view.stale is due


def test_tags_longer_than_the_spec_allows_are_refused():
    check_tags("cpu", semver.Version.parse("1.5.0-rc.1"))
    longest = "1.5.0-" + "a" * (128 - len("1.5.0--cpu"))
    check_tags("cpu", semver.Version.parse(longest))  # exactly 128 characters
    with pytest.raises(ConfigError, match=r"is not a valid image tag \(129 characters\)") as info:
        check_tags("cpu", semver.Version.parse(longest + "a"))
    assert "shorter" in info.value.hint
