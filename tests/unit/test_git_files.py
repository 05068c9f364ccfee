"""git and files helpers: a real repository's revision, files at a ref, atomic JSON, UTC stamps."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from paddlecd import files, git


@pytest.fixture
def repo(tmp_path):
    """A git repository with one commit, an origin URL holding a token, and images/lock.yaml."""
    def run(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    run("init", "-q", "-b", "main")
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "lock.yaml").write_text("bases: {}\n")
    (tmp_path / "a.txt").write_text("one\n")
    run("add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "first")
    run("remote", "add", "origin", "https://bot:s3cret@git.example/team/paddlecd.git")
    return tmp_path


def test_revision_of_a_clean_and_a_dirty_tree(repo):
    rev = git.revision(repo)
    assert re.fullmatch(r"[0-9a-f]{40}", rev.full) and rev.short == rev.full[:7] and rev.known
    assert dt.datetime.fromisoformat(rev.committed).tzinfo is not None
    git.revision.cache_clear()
    (repo / "images" / "lock.yaml").write_text("bases: {cpu: {}}\n")  # the lock does not count
    assert git.revision(repo).short == rev.full[:7]
    git.revision.cache_clear()
    (repo / "a.txt").write_text("two\n")
    short, full, _ = git.revision(repo)
    assert (short, full) == (rev.full[:7] + "-dirty", rev.full)


def test_revision_outside_git(tmp_path):
    rev = git.revision(tmp_path)
    assert (rev.short, rev.full, rev.known) == ("nogit", "unknown", False)


def test_a_checkout_without_git_on_path_is_refused_not_taken_for_no_checkout(repo, tmp_path_factory,
                                                                             monkeypatch):
    """Trial 11: with git off PATH, a build in a checkout was tagged ``cpu-nogit`` and labelled
    "unknown", and an upload recorded no revision, without a word."""
    from paddlecd.errors import ConfigError

    monkeypatch.setenv("PATH", str(tmp_path_factory.mktemp("empty-bin")))
    git.revision.cache_clear()
    (repo / "sub").mkdir()
    for root in (repo, repo / "sub"):
        with pytest.raises(ConfigError, match="git is not on PATH, and .* is a git checkout"):
            git.revision(root)
    outside = tmp_path_factory.mktemp("not-a-checkout")
    assert git.revision(outside).short == "nogit"  # no checkout: nothing to read
    git.revision.cache_clear()


def test_origin_url_drops_credentials(repo, tmp_path_factory):
    assert git.origin_url(repo) == "https://git.example/team/paddlecd.git"
    assert git.origin_url(tmp_path_factory.mktemp("nogit")) is None


@pytest.mark.parametrize(
    "remote, url",
    [
        ("https://github.com/org/paddlecd.git", "https://github.com/org/paddlecd.git"),
        ("ssh://git@git.example:2222/org/p.git", "ssh://git.example:2222/org/p.git"),
        ("git@github.com:org/paddlecd.git", "https://github.com/org/paddlecd.git"),
        ("/work/main", None),  # a clone of a folder: the label said a local path
        ("../main", None),
        ("file:///srv/git/p.git", None),
    ],
)
def test_the_source_label_is_a_network_url_or_nothing(remote, url):
    assert git.network_url(remote) == url


def test_show_reads_a_file_at_a_ref(repo):
    assert git.show(repo, "HEAD", "a.txt") == "one"
    assert git.show(repo, "HEAD", "missing.txt") is None


def test_output_failure_carries_gits_message(repo):
    from paddlecd.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        git.output(repo, "rev-parse", "no-such-ref", what="reading no-such-ref", hint="fetch it")
    assert e.value.cause.startswith("reading no-such-ref failed (exit 128): ")
    assert e.value.hint == "fetch it"


def test_now_iso_is_utc_with_z():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", files.now_iso())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", files.now_iso("milliseconds"))


def test_write_json_is_atomic_and_leaves_no_temp_file(tmp_path):
    path = files.write_json(tmp_path / "deep" / "r.json", {"b": 1, "a": [1, 2]})
    assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1} and path.read_text().endswith("\n")
    with pytest.raises(TypeError):
        files.write_json(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1}  # the old record survives
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_read_yaml_names_the_file_and_line_and_raises_the_callers_error(tmp_path):
    """One YAML reader for variants, job, pipeline and project files: bad YAML names the file and
    the 1-based line in the caller's error type; a missing file is that error only with a hint."""
    from paddlecd.errors import ConfigError, PipelineError

    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(PipelineError) as e:
        files.read_yaml(bad, error=PipelineError)
    assert e.value.cause.startswith(f"{bad}: not valid YAML (line 3): ")
    assert e.value.hint == "fix the syntax"
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="job file not found: .*absent.yaml") as e:
        files.read_yaml(missing, what="job file", missing_hint="pass --job")
    assert e.value.hint == "pass --job"
    with pytest.raises(FileNotFoundError):
        files.read_yaml(missing)
    (tmp_path / "empty.yaml").write_text("")
    assert files.read_yaml(tmp_path / "empty.yaml") is None


def test_read_yaml_refuses_a_device_and_a_huge_file(tmp_path):
    """A re-trial: ``deploy --job /dev/zero`` read until the machine killed it (exit 137)."""
    from paddlecd.errors import ConfigError

    with pytest.raises(ConfigError, match="/dev/zero: not a regular file"):
        files.read_yaml(Path("/dev/zero"), what="job file")
    huge = tmp_path / "huge.yaml"
    huge.write_text("a: 1\n" + "#" * files.YAML_MAX_BYTES)
    with pytest.raises(ConfigError, match="bytes, more than a job file holds"):
        files.read_yaml(huge, what="job file")


def test_a_yaml_mapping_that_repeats_a_key_is_refused_with_its_line(tmp_path):
    """PyYAML keeps the last of two equal keys; a settings or job file that says a thing twice
    is refused instead, naming the file and the line of the repeat."""
    from paddlecd.errors import ConfigError

    path = tmp_path / "paddlecd.yaml"
    path.write_text("registry:\n  url: a.example\n  url: b.example\n")
    with pytest.raises(ConfigError, match=r"paddlecd.yaml: not valid YAML \(line 3\): "
                                          r"duplicate key 'url'"):
        files.read_yaml(path)
    assert files.load_yaml("base: &b {p: 1}\nrun:\n  <<: *b\n  p: 2\n")["run"] == {"p": 2}


def test_a_yaml_file_that_is_not_utf8_is_named(tmp_path):
    """A trial: a paddlecd.yaml of binary bytes ended in UnicodeDecodeError's traceback."""
    from paddlecd.errors import ConfigError

    path = tmp_path / "paddlecd.yaml"
    path.write_bytes(b"\xff\xfe bad")
    with pytest.raises(ConfigError, match=r"paddlecd.yaml: not UTF-8 text \(byte 0\)"):
        files.read_yaml(path)


def test_a_write_that_fails_names_the_path_asked_for_never_the_temp_file(tmp_path):
    """A trial: ``release.policy --out <a folder>`` said "Is a directory:
    /tmp/.trial-state.i0grya_q" (the temp file's name) and wrote nothing."""
    with pytest.raises(IsADirectoryError) as e:
        files.write_text(tmp_path, "x")
    assert e.value.filename == str(tmp_path)
    (tmp_path / "ro").mkdir(mode=0o500)
    target = tmp_path / "ro" / "policy.yaml"
    if os.geteuid() != 0:  # root writes into a 0500 folder anyway
        with pytest.raises(PermissionError) as e:
            files.write_text(target, "x")
        assert e.value.filename == str(target)
    with pytest.raises(OSError) as e:
        files.write_text(Path("/proc/nope/policy.yaml"), "x")
    assert e.value.filename == "/proc/nope/policy.yaml"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]


def test_a_file_where_a_folder_is_needed_is_named(tmp_path):
    """Trial 9: ``artifacts.download … /tmp/f/sub``, ``release.policy --out /tmp/f/sub.yaml`` with
    /tmp/f a file said "File exists: /tmp/f/sub.yaml" (which does not exist)."""
    from paddlecd import files

    (tmp_path / "f").write_text("x")
    for target in (tmp_path / "f" / "sub", tmp_path / "f" / "sub" / "deeper.yaml"):
        try:
            target.parent.mkdir(parents=True, exist_ok=True) if target.suffix else \
                target.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            cause, hint = files.os_error_text(e)
        assert cause.startswith(f"{tmp_path / 'f'} is a file, not a folder"), cause
        assert "folders are folders" in hint


def test_a_write_removes_the_temp_files_a_killed_writer_left(tmp_path):
    """Trial 10: kill -9 between writing and renaming left ``.p.yaml.XXXX`` (release.policy),
    ``.h.png.XXXX`` (release.compare) and ``.r.XXXX.render/`` (cluster.render) beside their
    targets for good. The temp names carry the writer's pid; the next write removes a gone
    writer's and keeps a live one's."""
    import os
    import subprocess

    from paddlecd import files

    dead = subprocess.Popen(["sleep", "60"])
    dead.kill()
    dead.wait()
    killed = tmp_path / f".p.yaml.{dead.pid}.abc"
    killed.write_text("half")
    live = tmp_path / f".p.yaml.{os.getpid()}.def"
    live.write_text("mine")
    folder = tmp_path / f".r.{dead.pid}.ghi.render"
    folder.mkdir()
    (folder / "00-job-x.yaml").write_text("kind: Job\n")
    other = tmp_path / ".p.yaml.md"  # no pid: not a temp of ours
    other.write_text("x")
    files.write_text(tmp_path / "p.yaml", "policy\n")
    assert not killed.exists() and live.exists() and other.exists() and folder.exists()
    files.sweep_killed(tmp_path, "r")
    assert not folder.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["p.yaml", live.name, other.name])


def test_write_text_replaces_a_link_and_never_writes_through_it(tmp_path):
    """Every state file paddlecd writes (summary.md, latest, smoke.log, check.json, the job
    manifests, rank logs) goes through files.write_text: a link put in its place is replaced,
    its target left alone (trial 13: `latest` and summary.md were written through links)."""
    from paddlecd import files

    victim = tmp_path / "victim.txt"
    victim.write_text("victim data")
    link = tmp_path / "state" / "summary.md"
    link.parent.mkdir()
    link.symlink_to(victim)
    files.write_text(link, "# run\n")
    assert victim.read_text() == "victim data"
    assert not link.is_symlink() and link.read_text() == "# run\n"


@pytest.mark.parametrize("folder", ["/tmp", "/usr"])
def test_an_output_file_named_as_an_existing_folder_is_called_a_folder(folder):
    """Trial 13: ``release.policy --out /tmp`` said "/ is the root folder" (the folder it
    would go in), not that /tmp is a folder."""
    from paddlecd.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"--out {folder} is a folder, not a file"):
        files.refuse_output_place(folder, "--out", folder=False)


def test_an_output_file_named_with_a_final_slash_is_called_a_folder(tmp_path):
    """Trial 14: ``release.policy --out /tmp/new/`` (no such folder) wrote a file /tmp/new and
    said "wrote /tmp/new/"."""
    from paddlecd.errors import ConfigError

    with pytest.raises(ConfigError, match="names a folder \\(it ends in '/'\\), not a file"):
        files.refuse_output_place(f"{tmp_path}/new/", "--out", folder=False)
    assert not (tmp_path / "new").exists()
