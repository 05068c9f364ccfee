"""Bootstrapping the CPU base: which Debian mirror the host's apt sources give (no debootstrap
run)."""

from __future__ import annotations

from paddlecd import config
from paddlecd.image import bootstrap


def test_bootstrap_mirror_skips_non_debian_archives(tmp_path):
    s = config.load(root=tmp_path, environ={})
    ubuntu = tmp_path / "ubuntu.sources"
    ubuntu.write_text("Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble\n")
    debian = tmp_path / "debian.sources"
    debian.write_text("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n")
    security = tmp_path / "sources.list"
    security.write_text("deb http://security.debian.org/debian-security bookworm-security main\n")
    assert bootstrap.host_mirror(s, [ubuntu, security]) == bootstrap.DEFAULT_MIRROR
    assert bootstrap.host_mirror(s, [ubuntu, debian]) == "http://mirror.example/debian"
    s2 = config.load(
        {"build.debian_mirror": "http://pinned.example/debian"}, root=tmp_path, environ={}
    )
    assert bootstrap.host_mirror(s2, [debian]) == "http://pinned.example/debian"
