"""Validation of model names, versions and store URLs, and the stores' settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.manifest import check_name, check_version
from paddlecd.artifacts.storage import FileStore, Location, open_store, parse_url
from paddlecd.config import StorageSettings
from paddlecd.errors import ConfigError


@pytest.mark.parametrize("name", ["ocr-det", "a", "m2", "x" * 63])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "OCR", "ocr_det", "-ocr", "ocr-", "a/b", "x" * 64, "ocr.det"])
def test_bad_names(name):
    with pytest.raises(ConfigError, match=f"invalid model name '{name}'"):
        check_name(name)


@pytest.mark.parametrize("version", ["1.4.0", "0.0.1", "2.0.0-rc.1", "1.0.0+build.7"])
def test_good_versions(version):
    assert check_version(version) == version


@pytest.mark.parametrize("version", ["1.4", "v1.4.0", "1.4.0.1", "01.4.0", "", "latest"])
def test_bad_versions(version):
    with pytest.raises(ConfigError, match="not semver") as e:
        check_version(version)
    assert "MAJOR.MINOR.PATCH" in e.value.hint


@pytest.mark.parametrize(
    ("url", "loc"),
    [
        ("s3://models", Location("s3", "models", "")),
        ("s3://models/paddle/", Location("s3", "models", "paddle")),
        ("s3://my.models-1/a/b", Location("s3", "my.models-1", "a/b")),
        ("file:///srv/models/", Location("file", "", "/srv/models")),
    ],
)
def test_good_urls(url, loc):
    assert parse_url(url) == loc


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://", "has no bucket"),
        ("s3:///paddle", "has no bucket"),
        ("s3://Models", "not a valid bucket name"),
        ("s3://ab", "not a valid bucket name"),
        ("gs://models", "scheme must be s3:// or file://"),
        ("models/paddle", "scheme must be"),
        ("file://relative/path", r"file URLs take no host \('relative'\)"),
        ("file:relative/path", "absolute path"),
        # trial 4: the query and fragment were dropped unsaid, a host was "not absolute"
        ("s3://bkt/p?versionId=1", r"has a query \('\?versionId=1'\)"),
        ("s3://bkt/p#frag", r"has a fragment \('#frag'\)"),
        ("file://otherhost/tmp/s", r"file URLs take no host \('otherhost'\)"),
        ("s3://models/../x", "has a '.' or '..' segment"),
        ("s3://models/a/./b", "has a '.' or '..' segment"),
        ("s3://models/..", "has a '.' or '..' segment"),
        ("file:///srv/models/../../etc", "has a '.' or '..' segment"),
        # a trial: the plan said "create" for these (deploy refused them for output.path)
        ("file:///", "is the root folder"),
        ("file:///etc", "is inside the system folder /etc"),
        ("file:///usr/share/models", "is inside the system folder /usr"),
        ("file:///tmp", "is a top-level folder"),
        # trial 15: planned "create" (a store in the logs, in root's Docker or AWS credentials)
        ("file:///var/lib", "is a folder of system state as a whole"),
        ("file:///var/log/m", "is inside the system folder /var/log"),
        ("file:///root/.docker/m", "is inside the credential folder /root/.docker"),
        ("file:///home/x/.aws", "is inside the credential folder /home/x/.aws"),
        ("s3://models/a//b", "has an empty segment"),  # a re-trial: kept as the key a//b/
        ("file:///srv/models//x", "has an empty segment"),  # trial 7: collapsed to /srv/models/x
        ("file:////srv/models", "has an empty segment"),
        ("s3://models//paddle", "has an empty segment"),  # trial 8: got as far as credentials
    ],
)
def test_bad_urls(url, message):
    with pytest.raises(ConfigError, match=message):
        parse_url(url)


def test_a_file_url_with_a_host_is_told_the_absolute_url_of_that_folder(tmp_path, monkeypatch):
    """Trial 18: file://relative/x was told to write file:///x, the 'relative' dropped."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        parse_url("file://relative/x")
    assert e.value.hint.startswith(f"write file://{tmp_path}/relative/x for that folder")


def test_a_store_linked_to_a_system_folder_is_refused(tmp_path):
    """A re-trial: file://<link to /etc> planned "create <link>/<name>/<version>" (in /etc)."""
    (tmp_path / "store").symlink_to("/etc")
    with pytest.raises(ConfigError, match="resolves to /etc, which is inside the system folder"):
        parse_url(f"file://{tmp_path / 'store'}")


def test_a_model_folder_linked_out_of_the_store_is_refused(tmp_path):
    """A trial: ``artifacts.list --url file://<store>/etc`` with ``<store>/etc -> /etc`` listed
    every folder of /etc as an "incomplete" version."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "etc").symlink_to("/etc")
    store = FileStore(tmp_path / "store")
    with pytest.raises(ConfigError, match="resolves to /etc, outside the store"):
        arts.list_versions(store, "etc")
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "store" / "m" / "1.0.0").mkdir(parents=True)
    (tmp_path / "store" / "m" / "1.0.0" / "manifest.json").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ConfigError, match="outside the store"):
        store.get_bytes("m/1.0.0/manifest.json")


def test_a_version_folder_linked_out_of_the_store_is_named_not_called_missing(tmp_path):
    """Trial 7: ``<store>/m/2.0.0 -> /tmp/export`` was skipped by the listing (a folder link is
    not followed) and ``artifacts.list`` said there was no model 'm'."""
    (tmp_path / "export").mkdir()
    (tmp_path / "store" / "m").mkdir(parents=True)
    (tmp_path / "store" / "m" / "2.0.0").symlink_to(tmp_path / "export")
    with pytest.raises(ConfigError, match=r"m/2\.0\.0 resolves to .*export, outside the store"):
        arts.list_versions(FileStore(tmp_path / "store"), "m")


def test_a_damaged_manifest_is_listed_as_damaged_and_the_listing_exits_8(tmp_path):
    """Trial 7: a manifest.json that is not JSON, or not a manifest, was listed as 'incomplete'
    (an interrupted upload) with exit 0, while show, check and download called it invalid."""
    from support import invoke

    (tmp_path / "store" / "m" / "1.0.0").mkdir(parents=True)
    (tmp_path / "store" / "m" / "1.0.0" / "manifest.json").write_text('{"files": "x"}')
    (tmp_path / "store" / "m" / "1.1.0").mkdir()
    (tmp_path / "store" / "m" / "1.1.0" / ".model.json.x.tmp").write_text("killed")
    run = invoke("artifacts.list", f"file://{tmp_path / 'store'}/m",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 8, run.stderr
    assert "1.0.0\tdamaged" in run.stdout and "1.1.0\tincomplete" in run.stdout
    assert "the manifest.json of 1.0.0 is damaged" in run.stderr and "hint: " in run.stderr


def test_a_folder_that_is_no_version_is_not_listed_as_one(tmp_path):
    (tmp_path / "store" / "lin" / "notaversion").mkdir(parents=True)
    (tmp_path / "store" / "lin" / "notaversion" / "x").write_text("x")
    (tmp_path / "store" / "lin" / "1.0.0").mkdir()
    (tmp_path / "store" / "lin" / "1.0.0" / "x").write_text("x")
    assert [v["version"] for v in arts.list_versions(FileStore(tmp_path / "store"), "lin")] == [
        "1.0.0"]


def test_default_store_is_a_folder_under_the_state_dir(tmp_path):
    s = config.load(root=tmp_path, environ={})
    assert arts.default_store_url(s) == f"file://{tmp_path.resolve()}/.paddlecd/artifacts"
    store = arts.store_for(s)
    assert (
        isinstance(store, FileStore)
        and store.root == tmp_path.resolve() / ".paddlecd" / "artifacts"
    )


def test_split_model_urls(tmp_path):
    s = config.load(root=tmp_path, environ={})
    assert arts.split_model_url("s3://models/paddle/ocr-det/1.4.0", s, parts=2) == (
        "s3://models/paddle",
        ["ocr-det", "1.4.0"],
    )
    assert arts.split_model_url("s3://models/ocr-det", s, parts=1) == (
        "s3://models",
        ["ocr-det"],
    )
    assert arts.split_model_url("ocr-det/1.4.0", s, parts=2)[1] == ["ocr-det", "1.4.0"]
    assert arts.split_model_url("file:///srv/m/ocr-det", s, parts=1) == (
        "file:///srv/m",
        ["ocr-det"],
    )
    for bad in ("s3://models/1.4.0", "ocr-det", "file:///ocr-det/1.4.0"):
        with pytest.raises(ConfigError):
            arts.split_model_url(bad, s, parts=2)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"addressing_style": "dns"}, "storage.addressing_style 'dns'"),
        ({"checksum_mode": "always"}, "storage.checksum_mode 'always'"),
        ({"multipart_chunk_mb": 4}, "must be >= 5"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1"),
    ],
)
def test_bad_s3_settings(knobs, message):
    with pytest.raises(ConfigError, match=message):
        open_store("s3://models", StorageSettings(**knobs))


def test_s3_settings_reach_the_client():
    store = open_store(
        "s3://models/p",
        StorageSettings(
            endpoint_url="http://127.0.0.1:9",
            region="eu-west-3",
            addressing_style="virtual",
            multipart_chunk_mb=8,
            max_concurrency=3,
        ),
    )
    cfg = store.client.meta.config
    assert (store.client.meta.endpoint_url, store.client.meta.region_name) == (
        "http://127.0.0.1:9",
        "eu-west-3",
    )
    assert cfg.s3["addressing_style"] == "virtual"
    assert (cfg.request_checksum_calculation, cfg.response_checksum_validation) == (
        "when_required",
    ) * 2
    assert (store.transfer.multipart_chunksize, store.transfer.max_concurrency) == (
        8 * 1024 * 1024,
        3,
    )
    assert store.url == "s3://models/p"


def test_file_store_writes_atomically_and_lists(tmp_path):
    store = FileStore(tmp_path / "store")
    src = tmp_path / "f.bin"
    src.write_bytes(b"z" * 5000)
    seen = []
    store.put_file(src, "m/1.0.0/f.bin", progress=seen.append)
    store.put_bytes(b"{}", "m/1.0.0/manifest.json")
    assert sum(seen) == 5000
    assert [(o.key, o.size) for o in store.list("m/")] == [
        ("m/1.0.0/f.bin", 5000),
        ("m/1.0.0/manifest.json", 2),
    ]
    assert (
        store.get_bytes("m/1.0.0/manifest.json") == b"{}" and store.get_bytes("m/2.0.0/x") is None
    )

    class Boom(Exception):
        pass

    def fail(_n):
        raise Boom

    with pytest.raises(Boom):
        store.put_file(src, "m/1.0.0/g.bin", progress=fail)
    assert sorted(p.name for p in (tmp_path / "store" / "m" / "1.0.0").iterdir()) == [
        "f.bin",
        "manifest.json",
    ]
    store.delete(["m/1.0.0/f.bin", "m/1.0.0/absent"])
    assert store.head("m/1.0.0/f.bin") is None and store.head("m/1.0.0/manifest.json").size == 2


def test_file_url_for_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    from paddlecd.errors import StorageError

    with pytest.raises(StorageError, match="is not a folder"):
        FileStore(Path(tmp_path / "f")).check()
    # trial 9: a store below a file passed the dry run, and the upload then failed
    with pytest.raises(StorageError, match=f"cannot be made: {tmp_path / 'f'} is a file"):
        FileStore(Path(tmp_path / "f" / "store")).check()


def test_a_final_newline_is_not_part_of_a_valid_name_or_version():
    """A third trial: ``upload --version $'1.0.0\\n'`` planned ``.../m1/1.0.0\\n`` (a ``$`` in the
    patterns, and in ``semver``'s, matches before a final newline). Names, versions, Paddle
    versions, digest references and base tags are refused with the newline shown escaped."""
    from paddlecd.artifacts.manifest import DIGEST_REF_RE, check_paddle_version
    from paddlecd.image.variants import TAG_RE

    with pytest.raises(ConfigError, match=r"invalid model version '1\.0\.0\\n'"):
        check_version("1.0.0\n")
    with pytest.raises(ConfigError, match=r"invalid model name 'm1\\n'"):
        check_name("m1\n")
    with pytest.raises(ConfigError):
        check_paddle_version("3.0.0\n")
    assert not DIGEST_REF_RE.match("r/p@sha256:" + "0" * 64 + "\n")
    assert not TAG_RE.match("3.0.0-cpu-bookworm\n")
    assert check_version("1.0.0") == "1.0.0" and check_name("m1") == "m1"


@pytest.mark.parametrize("arg", ["file:///srv/store//m@1.0.0", "s3://models/p//m", "m//1.0.0"])
def test_a_model_url_with_an_empty_segment_is_refused_by_the_reads_too(tmp_path, arg):
    """Trial 8: artifacts.show and artifacts.list collapsed the '//' that upload refuses."""
    from paddlecd import config
    from paddlecd.artifacts.storage import split_model_url

    from support import ROOT

    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    with pytest.raises(ConfigError, match=r"has an empty segment \('//'\)"):
        split_model_url(arg.split("@")[0], s, parts=2 if arg.startswith("m//") else 1)


def test_a_store_that_is_a_file_is_named_by_list_and_download(tmp_path):
    """Trial 10: ``PADDLECD_STORAGE_URL=file://<a file>`` made artifacts.list say "no model
    named 't10m'" (download likewise); doctor said "is not a folder"."""
    from paddlecd.errors import StorageError

    (tmp_path / "f").write_text("x")
    store = FileStore(tmp_path / "f")
    with pytest.raises(StorageError, match="is not a folder"):
        arts.list_model(store, "m")
    with pytest.raises(StorageError, match="is not a folder"):
        arts.download(store, "m", "1.0.0", tmp_path / "d")


@pytest.mark.parametrize("url", ["s3://models/a\nb", "s3://models/a\x01b", "file:///tmp/st\tore",
                                 "file:///tmp/st\rore", "s3://mod\nels/p"])
def test_a_control_character_in_a_store_url_is_refused_not_dropped(url):
    """Trial 11: urllib drops tabs, CR and LF (WHATWG), so ``file:///tmp/st\\tore`` uploaded to
    /tmp/store, exit 0; a \\x01 reached the server, whose 500 was blamed."""
    from paddlecd.artifacts.storage import split_model_url

    with pytest.raises(ConfigError, match="holds the control character"):
        parse_url(url)
    with pytest.raises(ConfigError, match="holds the control character"):
        split_model_url(url + "/m/1.0.0", None, parts=2)


@pytest.mark.parametrize("url", ["s3://user:pw@bkt/p", "s3://pw@bkt", "file://u:pw@/tmp/x"])
def test_a_store_url_with_a_password_is_refused_without_printing_it(url):
    """Trial 11: ``--to s3://user:pw@bkt/p`` said "'user:pw@bkt' is not a valid bucket name"."""
    with pytest.raises(ConfigError, match="carries a user or password") as e:
        parse_url(url)
    assert "pw" not in e.value.cause and "***@" in e.value.cause


def test_a_manifest_with_a_key_twice_or_a_web_page_is_named_so(tmp_path):
    """Trial 13: a manifest.json with ``"name"`` twice (the last one right) was shown and
    downloaded as verified; a sign-in portal's page in its place was "not JSON", with the hint
    to overwrite a healthy model."""
    from paddlecd.artifacts.transfer import InvalidManifestError
    from paddlecd.errors import StorageError

    store = FileStore(tmp_path / "store")
    store.put_bytes(b'{"name": "other", "name": "m"}', "m/1.0.0/manifest.json")
    with pytest.raises(InvalidManifestError, match="the key 'name' is given twice"):
        arts.read_manifest(store, "m/1.0.0/")
    store.put_bytes(b"<html><body>Sign in</body></html>", "m/1.1.0/manifest.json")
    with pytest.raises(StorageError) as e:
        arts.read_manifest(store, "m/1.1.0/")
    assert not isinstance(e.value, InvalidManifestError)  # not "damaged": nothing was read
    assert "answered a web page" in e.value.cause and "--overwrite" not in e.value.hint


def test_a_manifest_of_garbage_or_a_folder_in_its_place_is_named_as_damage(tmp_path):
    """Trial 19: random bytes as manifest.json were "not JSON ('utf-8' codec can't decode byte
    0xe0 in position 0: …)"; a folder named manifest.json was "no model at … (no
    manifest.json)" in show and download, and an unfinished upload in artifacts.list (exit 0)."""
    from paddlecd.artifacts.transfer import InvalidManifestError
    from paddlecd.errors import StorageError

    store = FileStore(tmp_path / "store")
    store.put_bytes(b"\xe0\x80garbage", "m/1.0.0/manifest.json")
    with pytest.raises(InvalidManifestError) as e:
        arts.read_manifest(store, "m/1.0.0/")
    assert e.value.cause == f"{store.url}/m/1.0.0/manifest.json: not UTF-8 text (byte 0)"
    store.put_bytes(b"", "m/1.1.0/manifest.json")
    with pytest.raises(InvalidManifestError, match="manifest.json: empty$"):
        arts.read_manifest(store, "m/1.1.0/")
    (tmp_path / "store" / "m" / "1.2.0" / "manifest.json").mkdir(parents=True)
    with pytest.raises(StorageError) as e:
        arts.read_manifest(store, "m/1.2.0/")
    assert e.value.cause == f"{store.url}/m/1.2.0/manifest.json is a folder, not a stored file"
    store.put_bytes(b"{}", "m/1.2.0/model.json")
    with pytest.raises(StorageError, match="is a folder, not a stored file"):  # not incomplete
        arts.list_versions(store, "m")


def test_a_version_longer_than_a_folder_name_holds_is_refused_by_its_length():
    """Trial 15: ``upload --version 1.0.0-<300 r>`` passed --dry-run, then failed on "File name
    too long: <state>/logs/upload-….log", hint "check the path"."""
    long = "1.0.0-" + "r" * 300
    with pytest.raises(ConfigError) as e:
        check_version(long)
    assert e.value.cause == "invalid model version '1.0.0-rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr'… " \
        "(306 characters): at most 128"
    edge = "1.0.0-" + "r" * 122
    assert check_version(edge) == edge


@pytest.mark.parametrize("length", [300, 5000])
def test_a_long_model_name_is_quoted_by_its_head_and_length(length):
    """Trial 17: ``upload --name`` of 300 or 5,000 characters was quoted for ~1,000 of them, where
    a long version is named by its head and length."""
    with pytest.raises(ConfigError) as e:
        check_name("m" * length)
    assert e.value.cause == f"invalid model name {'m' * 80!r}… ({length} characters)"
