"""Bootstrapping the CPU base without a real debootstrap: which Debian mirror the host's apt
sources give, and what debootstrap's and pip's recorded output becomes (lines and byte counts)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import EngineError
from paddlecd.image import bootstrap, downloads


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


DATA = Path(__file__).parent.parent / "data" / "bootstrap"


def test_debootstrap_protocol_reads_as_its_normal_lines_and_the_package_bytes():
    """A recorded ``debootstrap --debian-installer --download-only`` (bookworm minbase, its fd 3
    merged into stdout; the middle packages cut): the messages read as debootstrap's normal
    mode prints them, and the bytes rise to the total it announced, never back."""
    lines, events = [], []
    reader = downloads.DebootstrapOutput(lines.append, lambda *e: events.append(e))
    for line in (DATA / "debootstrap-debian-installer.txt").read_text().splitlines():
        reader(line)
    assert lines[:2] == ["I: Retrieving InRelease", "I: Checking Release signature"]
    assert "I: Retrieving adduser 3.134" in lines and lines[-1] == "I: Validating zlib1g " \
        "1:1.2.13.dfsg-1"
    assert any(x.startswith("gpgv: Good signature") for x in lines)  # its log lines pass on
    assert not [x for x in lines if re.match(r"(P|PA|PF|IA|IF):", x)]
    assert {(name, at) for name, _, _, at in events} == {(downloads.PACKAGES, None)}
    assert {total for _, _, total, _ in events} == {46038292}  # the Packages index's sizes
    done = [d for _, d, _, _ in events]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 46038292


def fake_debootstrap(tmp_path, monkeypatch, recording: str, code: int) -> Path:
    """A ``debootstrap`` on PATH that writes ``recording`` to its fd 3 (so it fails unless fd 3
    is open, as the real one refuses --debian-installer) and its arguments to a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "debootstrap"
    script.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\ncat {DATA / recording} >&3 || '
                      f'exit 99\nexit {code}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path / "args"


def test_debootstrap_runs_in_its_installer_mode_and_reports_bytes(tmp_path, monkeypatch):
    args = fake_debootstrap(tmp_path, monkeypatch, "debootstrap-debian-installer.txt", 0)
    lines, events = [], []
    bootstrap.debootstrap("bookworm", tmp_path / "rootfs", "http://mirror.example/debian",
                          ("libgomp1", "zlib1g"), on_line=lines.append,
                          on_transfer=lambda *e: events.append(e))
    assert args.read_text().split() == [
        "--debian-installer", "--variant=minbase", "--include=libgomp1,zlib1g", "bookworm",
        str(tmp_path / "rootfs"), "http://mirror.example/debian"]
    assert events[-1] == (downloads.PACKAGES, 46038292, 46038292, None)
    assert "I: Retrieving adduser 3.134" in lines


def test_debootstrap_failure_names_its_last_message(tmp_path, monkeypatch):
    fake_debootstrap(tmp_path, monkeypatch, "debootstrap-unreachable-mirror.txt", 1)
    lines = []
    with pytest.raises(EngineError) as e:
        bootstrap.debootstrap("bookworm", tmp_path / "rootfs", "http://127.0.0.1:9/debian", (),
                              on_line=lines.append)
    assert e.value.cause == ("debootstrap bookworm failed (exit 1): E: Failed getting release "
                             "file http://127.0.0.1:9/debian/dists/bookworm/Release")
    assert "PADDLECD_BUILD_DEBIAN_MIRROR" in e.value.hint
    assert lines == ["I: Retrieving InRelease", "I: Retrieving Release",
                     e.value.cause.split(": ", 1)[1]]


def test_pip_raw_progress_becomes_one_growing_download_timed_by_buildkit():
    """pip 25.1.1's ``--progress-bar raw`` in BuildKit's plain output, recorded from the base's
    build: the files with progress (paddlepaddle, numpy, Pillow, networkx) add up, each line
    timed by the step's own clock; every other line passes on."""
    recorded = (DATA / "pip-raw-buildkit.txt").read_text().splitlines()
    lines, events = [], []
    reader = downloads.PipOutput(lines.append, lambda *e: events.append(e))
    for line in recorded:
        reader(line)
    assert lines == [x for x in recorded if " Progress " not in x] and len(lines) < len(recorded)
    assert events[0] == (downloads.WHEELS, 0, 192824195, 42.82)
    files = 192824195 + 16918164 + 7140667 + 2068504
    assert events[-1] == (downloads.WHEELS, files, files, 54.24)
    done, at = [e[1] for e in events], [e[3] for e in events]
    assert done == sorted(done) and at == sorted(at)
