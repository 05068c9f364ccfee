"""The order xdist hands tests to workers: the collection's order (tests/conftest.py sorts it by
tier: unit tests, then integration tests without the base, then those that need it), with each
``xdist_group`` kept whole on one worker.

pytest-xdist's ``--dist loadgroup`` queues the largest work unit first (LoadScopeScheduling.schedule
sorts its units by test count, xdist 3.6.1), and every ungrouped test is a unit of one: so the
podman tier's group (``xdist_group("podman")``, it needs the bootstrapped base) went to a worker
at second 0, which then waited for the base's background bootstrap (support/base.py) while the
other worker ran the whole unit tier alone.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling


class CollectionOrder(LoadGroupScheduling):
    """``--dist loadgroup`` whose work units go out in the order their first test was collected."""

    _ordered = False

    def _assign_work_unit(self, node) -> None:
        # schedule() has filled the whole queue before it first assigns a unit
        if not self._ordered:
            first: dict[str, int] = {}
            for nodeid in self.collection:
                first.setdefault(self._split_scope(nodeid), len(first))
            for scope in sorted(self.workqueue, key=first.__getitem__):
                self.workqueue.move_to_end(scope)
            self._ordered = True
        super()._assign_work_unit(node)
