"""The ledger read one record at a time: a test oracle that :func:`paddlecd.release.ledger.read`
must agree with (and the benchmarks' baseline read).

One manifest GET per record tag, no checkpoint, no head, no cache: an independent reader of what
the registry holds (docs/design/ledger.md, invariant 1).
"""

from __future__ import annotations

import json

from paddlecd.registry.client import RegistryClient
from paddlecd.release import ledger


def read_each(client: RegistryClient, repository: str, variant: str | None = None,
              tags: list[str] | None = None) -> list[ledger.Record]:
    """All records of ``repository`` (of ``variant``) in ledger order, one manifest GET each.

    Args:
        tags: the tag list to read them from (default: listed now).
    """
    tags = client.list_tags(repository) if tags is None else tags
    records = []
    for record_id in ledger.record_ids(tags, variant):
        annotations = client.get_manifest(repository, record_id).json().get("annotations") or {}
        if ledger.ANNOTATION in annotations:  # a tag that only looks like a record is not ours
            records.append(ledger.Record.from_json(json.loads(annotations[ledger.ANNOTATION])))
    return records
