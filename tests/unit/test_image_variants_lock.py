"""Variants (tag parsing, schema, cross-checks) and base-lock logic; no services."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from paddlecd import config
from paddlecd.errors import ConfigError, LockError
from paddlecd.image import lock, variants

from support import ROOT, project_settings


@pytest.mark.parametrize("tag,expected", [
    ("3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6", ("3.0.0", "11.8", "8.9", "8.6", "gpu")),
    ("3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5", ("3.0.0", "12.6", "9.5", "10.5", "gpu")),
    ("2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6", ("2.6.1", "12.0", "8.9", "8.6", "gpu")),
    ("2.6.1-gpu-cuda12.0-cudnn8.9", ("2.6.1", "12.0", "8.9", None, "gpu")),
    ("3.0.0", ("3.0.0", None, None, None, "cpu")),
    ("3.0.0-cpu-bookworm", ("3.0.0", None, None, None, "cpu")),
])
def test_parse_base_tag(tag, expected):
    info = variants.parse_base_tag(tag)
    assert (info.paddle, info.cuda, info.cudnn, info.tensorrt, info.device) == expected


@pytest.mark.parametrize(
    "tag", ["latest", "3.0-gpu", "v3.0.0", "3.0.0-gpu-cuda12-cudnn9", "3.0.0-gpu-cuda12.6-trt10.5"]
)
def test_parse_base_tag_rejects_non_paddle_tags(tag):
    with pytest.raises(ConfigError) as e:
        variants.parse_base_tag(tag)
    assert tag in e.value.cause and e.value.hint


def settings_for(tmp_path: Path, variants_yaml: str | None = None) -> config.Settings:
    vfile = ROOT / "images/variants.yaml"
    if variants_yaml is not None:
        vfile = tmp_path / "variants.yaml"
        vfile.write_text(variants_yaml)
    return project_settings(tmp_path / "state", lock_file=tmp_path / "lock.yaml",
                            variants_file=str(vfile))


def test_repo_variants_load_with_gpu_versions_from_tags(tmp_path):
    vs = variants.load(settings_for(tmp_path))
    assert {"cpu", "cu118", "cu126", "cu120-p261"} <= set(vs)
    assert (vs["cu126"].cuda, vs["cu126"].cudnn, vs["cu126"].tensorrt) == ("12.6", "9.5", "10.5")
    assert (
        vs["cpu"].base.startswith("127.0.0.1:5000/")
        and vs["cpu"].bootstrap.wheel == "paddlepaddle==3.0.0"
    )


@pytest.mark.parametrize(
    "body,fragment,hint",
    [
        (
            "variants: {a: {device: cpu, base: 'r/p:3.0.0', paddle: '3.0.0', paddel: 1}}",
            "unknown key 'paddel'",
            "did you mean 'paddle'",
        ),
        (
            "variants: {a: {device: tpu, base: 'r/p:3.0.0', paddle: '3.0.0'}}",
            "unknown device 'tpu' at variants.a.device",
            "device is one of: cpu, gpu",
        ),
        (
            "variants: {a: {device: cpu, base: 'r/p:3.0.0'}}",
            "'paddle' is a required property",
            None,
        ),
        ("variantz: {}", "unknown key 'variantz'", "did you mean 'variants'"),
        # trial 20: "variants: None is not of type 'object'" (Python's None, jsonschema's words)
        ("variants: null", "variants is null, not a mapping (an object)", None),
        ("variants: {a: {device: cpu, base: 'r/p:3.0.0', paddle: 3.0}}",
         "variants.a.paddle is the number 3.0, not text (a string)", None),
        ("- a\n- b", "expected a mapping", None),
        (
            "variants: {a: {device: gpu, base: 'r/p:3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5', "
            "paddle: '3.0.0', cuda: '12.6', cudnn: '8.9', tensorrt: '10.5'}}",
            "declares cudnn=8.9 but its base tag",
            None,
        ),
        (
            "variants: {a: {device: cpu, base: 'r/p:3.0.0-gpu-cuda12.6-cudnn9.5', "
            "paddle: '3.0.0'}}",
            "declares device=cpu",
            None,
        ),
        (
            "variants: {a: {device: cpu, base: 'r/p:2.6.1', paddle: '3.0.0'}}",
            "declares paddle=3.0.0",
            None,
        ),
        # trial 16: "its base tag 3.0.0-cpu-bookworm says None", hint "pick the base tag that
        # carries cuda 11.8" for a cpu variant
        (
            "variants: {a: {device: cpu, base: 'r/p:3.0.0-cpu-bookworm', paddle: '3.0.0', "
            "cuda: '11.8'}}",
            "declares cuda=11.8 but its base tag 3.0.0-cpu-bookworm names no cuda",
            "drop 'cuda' from variant 'a' (a cpu variant has no CUDA stack)",
        ),
    ],
)
def test_bad_variants_files(tmp_path, body, fragment, hint):
    with pytest.raises(ConfigError) as e:
        variants.load(settings_for(tmp_path, body))
    assert fragment in e.value.cause
    assert "\n" not in e.value.cause
    if hint:
        assert hint in e.value.hint


def test_unknown_variant_suggests(tmp_path):
    with pytest.raises(ConfigError) as e:
        variants.get(settings_for(tmp_path), "cu12")
    assert "unknown variant 'cu12'" in e.value.cause and "did you mean" in e.value.hint


@dataclass
class FakeDescriptor:
    digest: str
    media_type: str = "application/vnd.oci.image.index.v1+json"
    size: int = 100


class FakeClient:
    """In-memory stand-in for the registry client (unit tests only; the real one is tested against
    distribution in tests/integration)."""

    def __init__(self, digests: dict[str, str], fail: set[str] = frozenset()):
        self.digests, self.fail = digests, fail

    def resolve(self, repository, reference):
        from paddlecd.errors import RegistryError

        if repository in self.fail:
            raise RegistryError(f"registry for {repository} unreachable", "check the network")
        return FakeDescriptor(self.digests[f"{repository}:{reference}"])


BODY = """variants:
  a: {device: cpu, base: 'reg.example/p/base:3.0.0', paddle: '3.0.0'}
  b: {device: gpu, base: 'reg.example/p/gpu:3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5', paddle: '3.0.0',
      cuda: '12.6', cudnn: '9.5', tensorrt: '10.5'}
"""
DA, DB = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def test_lock_writes_pins_and_check_refuses_missing_and_drift(tmp_path, monkeypatch):
    s = settings_for(tmp_path, BODY)
    client = FakeClient({"p/base:3.0.0": DA, "p/gpu:3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5": DB})
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: client)
    with pytest.raises(LockError) as e:
        lock.check(s, variants.get(s, "a"))
    assert "not locked" in e.value.cause and "invoke lock --variant a" in e.value.hint
    lock.lock(s, ["a"])
    entry = lock.check(s, variants.get(s, "a"))
    assert entry.pinned == f"reg.example/p/base@{DA}"
    assert "b" not in lock.read(s)
    lock.lock(s)
    assert lock.read(s)["b"].digest == DB and lock.read(s)["a"].digest == DA
    # variants.yaml moves the base of 'a' to another tag: the lock has drifted
    s2 = settings_for(
        tmp_path,
        BODY.replace("base:3.0.0'", "base:3.0.1'").replace(
            "paddle: '3.0.0'}\n  b", "paddle: '3.0.1'}\n  b"
        ),
    )
    with pytest.raises(LockError) as e:
        lock.check(s2, variants.get(s2, "a"))
    assert "drifted" in e.value.cause


def test_lock_is_all_or_nothing(tmp_path, monkeypatch):
    s = settings_for(tmp_path, BODY)
    client = FakeClient({"p/base:3.0.0": DA}, fail={"p/gpu"})
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: client)
    with pytest.raises(LockError) as e:
        lock.lock(s)
    assert "locking variant 'b'" in e.value.cause and "unreachable" in e.value.cause
    assert not Path(s.lock_file).exists()


def test_corrupt_lock_file(tmp_path):
    s = settings_for(tmp_path, BODY)
    Path(s.lock_file).write_text("bases: {a: [1, 2]}")
    with pytest.raises(LockError):
        lock.read(s)


@pytest.mark.parametrize("body, cause", [
    ("bases: [\n", "not valid YAML (line 2): did not find expected node content (a lock file)"),
    ("- a\n", "not a valid lock file (expected bases: {variant: {base, digest, media_type"),
    ("bases: {cpu: 5}\n", "bases.cpu is not a valid entry (expected bases:"),
    # trial 4: a list was taken as no entries ("has no entry", hint: bootstrap a 1 GB base), a
    # newer schema as a missing entry, a cut digest as "invalid digest" naming no file
    ("schema: 1\nbases: []\n", "not a valid lock file (expected bases:"),
    # trial 17: a 0-byte lock file (a killed writer) built without a word
    ("", "the lock file is empty"), ("# only a comment\n", "the lock file is empty"),
    ("schema: 1\n", "not a valid lock file (expected bases:"),
    ("schema: 2\nbases: {}\n", "schema '2': this paddlecd reads schema 1"),
    ("bases: {cpu: {base: 'b:1', digest: 'sha256:" + "1" * 63 + "', media_type: m, "
     "locked: t}}\n", "bases.cpu.digest 'sha256:" + "1" * 63 + "' is not a digest"),
    ("bases: {cpu: {base: 5, digest: 'sha256:" + "1" * 64 + "', media_type: m, locked: t}}\n",
     "bases.cpu is not a valid entry"),
    # trial 9: these passed every check and reached the network
    ("bases: {cpu: {base: 'b:1', digest: 'sha256:" + "1" * 64 + "', media_type: text/html, "
     "locked: '2026-12-01T09:00:00Z'}}\n",
     "bases.cpu.media_type 'text/html' is no image manifest or index type"),
    ("bases: {cpu: {base: 'b:1', digest: 'sha256:" + "1" * 64 + "', media_type: "
     "'application/vnd.oci.image.index.v1+json', locked: yesterday}}\n",
     "bases.cpu.locked 'yesterday' is not a UTC time"),
])
def test_a_broken_local_lock_file_is_one_line_naming_it(tmp_path, body, cause):
    """A third trial: a ``lock.local.yaml`` that is not YAML printed the parser's three-line
    mark (``in "<unicode string>", line 2, column 1)``) as the last line of the error."""
    s = settings_for(tmp_path, BODY)
    local = lock.paths(s)[1]
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(body)
    with pytest.raises(LockError) as e:
        lock.read(s)
    assert "\n" not in e.value.cause and str(local) in e.value.cause, e.value.cause
    assert cause in e.value.cause, e.value.cause
    assert e.value.hint == "delete it and run: invoke lock --variant <variant> for the variants " \
        "you build"  # trial 19: 'invoke lock' locked cu118 too, which needs Docker Hub


def test_lock_file_round_trip_is_stable(tmp_path, monkeypatch):
    s = settings_for(tmp_path, BODY)
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: FakeClient(
        {"p/base:3.0.0": DA, "p/gpu:3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5": DB}))
    lock.lock(s)
    text = Path(s.lock_file).read_text()
    assert text.startswith("# Generated by `invoke lock`")
    assert yaml.safe_load(text)["bases"]["a"]["digest"] == DA


def test_the_lock_task_says_which_file_each_pin_went_to_and_whether_it_changed(
        tmp_path, monkeypatch, capsys):
    """A trial: "pulled bases in images/lock.yaml" was printed when only the local lock was
    written. One line per variant: the file its pin is in, and written or unchanged."""
    from invoke import Context

    from paddlecd.cli import image as image_tasks

    body = BODY.replace("a: {device: cpu,", "a: {device: cpu, bootstrap: {suite: bookworm, "
                        "wheel: 'paddlepaddle==3.0.0'},")
    s = settings_for(tmp_path, body)
    client = FakeClient({"p/base:3.0.0": DA})
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: client)
    monkeypatch.setattr(image_tasks, "settings", lambda **flags: s)
    image_tasks.lock.body(Context(), variant=["a"])
    local = tmp_path / "state" / lock.LOCAL_LOCK
    assert capsys.readouterr().out.strip() == f"a: {DA} in {local}: written (per machine)"
    assert not (tmp_path / "lock.yaml").exists()
    image_tasks.lock.body(Context(), variant=["a"])
    assert capsys.readouterr().out.strip() == f"a: {DA} in {local}: unchanged (per machine)"


@pytest.mark.parametrize(("field", "value"), [
    ("suite", "../../etc"), ("suite", ""), ("suite", "/tmp/x"),  # debootstrap: scripts/<suite>
    ("wheel", ""), ("wheel", " "), ("wheel", "--index-url=http://evil/"), ("wheel", "a b"),
    ("packages", ["libgomp1", ""]), ("packages", ["-y"]), ("packages", ["a b"]),
    ("pip", ["--pre"]), ("pip", [""]),
])
def test_bootstrap_fields_are_names_not_paths_options_or_empty(tmp_path, field, value):
    """Trial 11: ``bootstrap.suite: ../../etc`` reached debootstrap (which sources
    scripts/<suite>) and came back as "a mirror that cannot be reached", exit 4; an empty suite
    was an engine "invalid reference format"; ``wheel: ""`` planned a base, exit 0."""
    import json

    boot = {"suite": "bookworm", "wheel": "paddlepaddle==3.0.0", field: value}
    body = ("variants: {cpu: {device: cpu, base: 'r/p:3.0.0-cpu', paddle: '3.0.0', "
            f"bootstrap: {json.dumps(boot)}}}}}")
    with pytest.raises(ConfigError) as e:
        variants.load(settings_for(tmp_path, body))
    assert f"variants.cpu.bootstrap.{field}" in e.value.cause, e.value.cause
    rule = {"suite": "never a path", "packages": "Debian Policy"}.get(field, "leading '-'")
    assert rule in e.value.hint  # the rule in words, not only the regex


def test_image_packages_are_one_requirement_each(tmp_path):
    body = "variants: {a: {device: cpu, base: 'r/p:3.0.0', paddle: '3.0.0', packages: ['-e .']}}"
    with pytest.raises(ConfigError, match="variants.a.packages"):
        variants.load(settings_for(tmp_path, body))


@pytest.mark.parametrize("value", ["../../etc/passwd", "/x/../etc/passwd", "", "Dockerfile\n",
                                   "gpu/../../x", "a\\b"])
def test_a_dockerfile_outside_images_is_refused_at_load(tmp_path, value):
    """Trial 13: ``dockerfile: ../../etc/passwd`` reached BuildKit (exit 4); ``""`` and a final
    newline gave the engine's words. (An absolute path is the user's own Dockerfile.)"""
    import json

    body = ("variants: {cpu: {device: cpu, base: 'r/p:3.0.0-cpu', paddle: '3.0.0', "
            f"dockerfile: {json.dumps(value)}}}}}")
    with pytest.raises(ConfigError) as e:
        variants.load(settings_for(tmp_path, body))
    assert "variants.cpu.dockerfile" in e.value.cause and "inside images/" in e.value.hint


def test_a_dockerfile_that_links_out_of_images_or_is_missing_is_named(tmp_path):
    """What the schema cannot see: a link under images/ that leads out, a missing file."""
    from paddlecd.image import build

    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "Dockerfile").symlink_to("/etc/passwd")
    (tmp_path / "images" / "folder").mkdir()
    s = config.load({"state_dir": str(tmp_path / "state")}, root=tmp_path, environ={})

    def variant(dockerfile):
        return variants.Variant(name="cpu", device="cpu", base="r/p:3.0.0-cpu", paddle="3.0.0",
                                dockerfile=dockerfile)

    with pytest.raises(ConfigError, match=r"variant 'cpu' dockerfile 'Dockerfile' leads out of "
                                          r"images/ \(to /etc/passwd\)"):
        build.dockerfile_of(s, variant("Dockerfile"))
    with pytest.raises(ConfigError, match="'absent': no such file"):
        build.dockerfile_of(s, variant("absent"))
    with pytest.raises(ConfigError, match="'folder': not a regular file"):
        build.dockerfile_of(s, variant("folder"))
    (tmp_path / "images" / "Dockerfile.cpu").write_text("FROM scratch\n")
    assert build.dockerfile_of(s, variant("Dockerfile.cpu")) == tmp_path / "images/Dockerfile.cpu"


def test_a_base_with_a_newline_is_named_by_file_and_key(tmp_path):
    """Trial 14: a final newline in ``base:`` split the refusal in two ("base tag '…⏎' is not a
    Paddle tag") naming neither the file nor the key."""
    body = "variants: {cpu: {device: cpu, base: \"r/p:3.0.0-cpu\\n\", paddle: '3.0.0'}}"
    with pytest.raises(ConfigError) as e:
        variants.load(settings_for(tmp_path, body))
    assert "variants.cpu.base" in e.value.cause and "variants.yaml" in e.value.cause


def test_a_build_failing_on_a_locked_base_the_registry_lacks_names_the_lock_file(tmp_path,
                                                                                 monkeypatch):
    """Trial 16: a pin to a digest the registry lacks was BuildKit's "…@sha256:…: not found",
    exit 4, hint "full build log", the lock file unnamed. The engine's failure is given here
    (BuildKit's words); the build itself runs in tests/integration/test_build_push_verify.py."""
    from paddlecd.errors import EngineError
    from paddlecd.image import build

    s = settings_for(tmp_path, BODY)
    client = FakeClient({"p/base:3.0.0": DA, "p/gpu:3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5": DB})
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: client)
    lock.lock(s, ["a"])
    entry = lock.check(s, variants.get(s, "a"))
    failed = EngineError(f"ERROR: failed to solve: {entry.pinned}: not found",
                         "full build log: /x/builder-a.log")
    missing = build._missing_base(s, "a", entry, failed)
    assert isinstance(missing, LockError) and missing.exit_code == 3
    assert missing.cause == (f"the locked base of 'a', {entry.pinned} (in "
                             f"{lock.paths(s)[0]}), is not in its registry")
    assert missing.hint.startswith("lock it again: invoke lock --variant a")
    other = EngineError("ERROR: failed to solve: process \"/bin/sh -c pip install x\" did not "
                        "complete successfully: exit code: 1", "full build log: /x/b.log")
    assert build._missing_base(s, "a", entry, other) is None


def test_a_build_log_on_a_full_disk_names_its_file():
    """Trial 16: a full state folder during build ended in "no space left on the device",
    naming no file (a file object's write error carries none). /dev/full answers every write
    with ENOSPC, as a full disk does."""
    import errno

    from paddlecd.image import build

    with pytest.raises(OSError) as e:
        with build._build_log(Path("/dev/full")) as write:
            for _ in range(2000):  # past the file object's buffer
                write("#5 [2/4] RUN pip install …")
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, "/dev/full")
