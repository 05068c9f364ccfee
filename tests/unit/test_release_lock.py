"""The promotion lock of the state folder (``locks/release-<repo>-<variant>.lock``): a plain
file paddlecd makes, never a link it follows. No registry is needed: the lock is taken before
any is asked."""

from __future__ import annotations

import pytest

from paddlecd import config
from paddlecd.errors import PromotionError
from paddlecd.release import promote


@pytest.mark.parametrize("what", ["link", "folder"])
def test_a_lock_that_is_a_link_or_a_folder_is_refused_and_nothing_outside_changes(
        tmp_path, what):
    """Trial 13: the lock replaced by a link to a file outside the state folder: the next
    rollback (filelock opens O_TRUNC through the link) emptied that file."""
    settings = config.load({"state_dir": str(tmp_path / "state")}, root=tmp_path, environ={})
    victim = tmp_path / "victim.txt"
    victim.write_text("victim data")
    locks = settings.state / "locks"
    locks.mkdir(parents=True)
    slug = f"{settings.release_repo}-cpu".replace("/", "_").replace(":", "_")
    lock = locks / f"release-{slug}.lock"
    if what == "link":
        lock.symlink_to(victim)
    else:
        lock.mkdir()
    with pytest.raises(PromotionError) as e:
        with promote._locked(settings, "cpu"):
            pass
    assert str(lock) in e.value.cause and "not a plain file" in e.value.cause
    assert victim.read_text() == "victim data"
    with promote._locked(settings, "gpu"):  # another variant's lock is its own plain file
        assert (locks / f"release-{slug[:-3]}gpu.lock").is_file()
