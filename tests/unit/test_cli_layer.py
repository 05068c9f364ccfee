"""The CLI layer (paddlecd.cli) and the logic it hands to the package: the namespace, the argv
workarounds, the catch site, the output streams, and the package functions the tasks call (lock
plan, bootstrap plan, verify failure, smoke listing, base ref, annotations, doctor rows).
No services."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from invoke import Exit, Task

from paddlecd import config, doctor
from paddlecd.cli import argv, common, ns
from paddlecd.errors import ConfigError, DoctorError, LockError, RegistryError, StorageError
from paddlecd.image import bootstrap, lock
from paddlecd.pipeline import affected, report
from paddlecd.pipeline.records import StageRun, Summary, VariantRun
from paddlecd.signing import keys
from paddlecd.verify import evidence, suite
from paddlecd.verify import run as smoke

from support import forkserver

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "c" * 64


def invoke(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECD_", "GITHUB_"))}
    return forkserver.run([str(ROOT / ".venv/bin/invoke"), *args], cwd=ROOT,
                          env={**base, **env}, timeout=120)


# ---------------------------------------------------------------- the shim and the namespace

def test_tasks_py_is_a_short_shim():
    lines = (ROOT / "tasks.py").read_text().splitlines()
    assert len(lines) < 60
    assert "paddlecd.cli" in "\n".join(lines) and "sys.path.insert(0" in "\n".join(lines)


def _names_by_task() -> dict[int, tuple[Task, list[str]]]:
    found: dict[int, tuple[Task, list[str]]] = {}

    def walk(coll, prefix):
        for name, t in coll.tasks.items():
            found.setdefault(id(t), (t, []))[1].append(prefix + name)
        for sub_name, sub in coll.collections.items():
            walk(sub, f"{prefix}{sub_name}.")

    walk(ns, "")
    return found


def test_every_task_has_help_text():
    for t, names in _names_by_task().values():
        assert (t.__doc__ or "").strip(), f"{names[0]} has no docstring (its --help text)"


def test_each_task_once_under_its_namespace_plus_at_most_a_short_verb():
    for _, names in _names_by_task().values():
        top = [n for n in names if "." not in n]
        nested = [n for n in names if "." in n]
        assert len(nested) <= 1 and len(top) <= 1, names
        assert not nested or not top or nested[0].endswith("." + top[0]), names
    assert {"build", "push", "verify", "lock", "promote", "deploy", "upload", "doctor",
            "image.bootstrap", "release.list", "pipeline.run", "smoke.checks"} <= set(ns.task_names)
    assert "smoke.run" not in ns.task_names  # a third name for verify


# ---------------------------------------------------------------- argv workarounds

@pytest.mark.parametrize("line,expected", [
    (["invoke", "build", "push", "verify", "--variant", "cu126"], "cu126"),
    (["invoke", "build", "--variant=cu118", "push"], "cu118"),
    (["invoke", "build", "-v", "cpu"], None),  # -v belongs to other tasks' flags
    (["invoke", "build", "--variant"], None),
])
def test_shared_variant(line, expected):
    assert argv.shared_variant(line) == expected


@pytest.mark.parametrize("line,expected", [
    # a trial: -v, the short form every task's help shows, was not shared
    (["invoke", "doctor", "release.list", "-v", "cpu"], "cpu"),
    (["invoke", "lock", "--dry-run", "release.list", "-v", "cu126"], "cu126"),
    (["invoke", "smoke.checks", "release.list", "--variant=cu118"], "cu118"),
    (["invoke", "build", "-v", "cpu", "push"], "cpu"),
    (["invoke", "doctor"], None),
    (["invoke", "nosuchtask", "-v", "cpu"], None),  # refused by the catch site, not read here
])
def test_shared_variant_reads_the_line_as_invoke_does(line, expected):
    assert argv.shared_variant(line, ns) == expected
    names = {t: dict(ns[t].help) for t in ns.task_names}
    argv.shared_variant(line + ["--json"], ns)  # a second parse leaves every task's help whole
    assert {t: dict(ns[t].help) for t in ns.task_names} == names


def test_help_after_a_task_is_rewritten_only_for_a_known_task():
    names = ns.task_names
    assert argv.help_argv(["/x/invoke", "artifacts.list", "--help"], names) == [
        "/x/invoke", "--help", "artifacts.list"]
    assert argv.help_argv(["inv", "release.show", "-h"], names) == ["inv", "--help", "release.show"]
    assert argv.help_argv(["inv", "nosuch", "--help"], names) is None
    assert argv.help_argv(["inv", "--help", "build"], names) is None
    calls = []
    def record(file, args):
        calls.append((file, args))

    argv.help_after_positional(["inv", "pipeline.run", "--help"], names, execvp=record)
    argv.help_after_positional(["inv", "pipeline.run", "pr"], names, execvp=record)
    assert calls == [("inv", ["inv", "--help", "pipeline.run"])]


def test_variant_comes_from_the_flag_the_command_line_or_cpu(monkeypatch):
    monkeypatch.setattr("sys.argv", ["invoke", "build", "push", "--variant", "cu126"])
    assert common.variant(None) == "cu126" and common.variant("cpu") == "cpu"
    monkeypatch.setattr("sys.argv", ["invoke", "promote"])
    assert common.variant(None) == "cpu"
    with pytest.raises(ConfigError, match="promote needs --variant"):
        common.variant(None, required_by="promote")


# ---------------------------------------------------------------- the catch site

def _failing(error: BaseException):
    @common.guarded
    def task_body(c):
        raise error

    return task_body


def test_catch_site_caps_each_line_of_a_hint_not_the_whole(capsys):
    """A hint that carries a log's last lines (a failed rank's) keeps every line; a line past the
    cap is cut in the middle."""
    tail = "\n".join(f"[rank 1] line {i} " + "x" * 80 for i in range(20)) + "\nfailing on purpose"
    with pytest.raises(Exit):
        _failing(ConfigError("rank 1 failed", f"last lines of rank 1:\n{tail}\n" + "y" * 5000))(
            None)
    err = capsys.readouterr().err
    assert "failing on purpose" in err and "[rank 1] line 0 " in err
    assert "characters cut" in err.splitlines()[-1] and len(err.splitlines()[-1]) < 1200


def test_catch_site_caps_what_an_error_quotes(capsys):
    # issue 21 trial: `promote --version "$(printf 1%.0s {1..100000}).0.0"` echoed 100 kB
    huge = "1" * 100_000 + ".0.0"
    with pytest.raises(Exit) as e:
        _failing(ConfigError(f"invalid version {huge!r}: not MAJOR.MINOR.PATCH", "h" * 5000))(None)
    assert e.value.code == 2
    cause, hint = capsys.readouterr().err.splitlines()[-2:]
    assert cause.startswith("error: invalid version '111")
    assert cause.endswith(": not MAJOR.MINOR.PATCH")
    assert "characters cut" in cause and len(cause) < 1200
    assert hint.startswith("hint: hhh") and len(hint) < 1200


@pytest.mark.parametrize("debug", [False, True])
def test_catch_site_keeps_the_exit_code_with_and_without_debug(monkeypatch, capsys, debug):
    if debug:
        monkeypatch.setenv("PADDLECD_DEBUG", "1")
    else:
        monkeypatch.delenv("PADDLECD_DEBUG", raising=False)
    for error, code in ((ConfigError("bad flag", "use another"), 2), (LockError("not locked"), 3),
                        (RegistryError("registry down", "start it"), 5),
                        (FileNotFoundError(2, "No such file or directory", "/nope"), 2)):
        with pytest.raises(Exit) as e:
            _failing(error)(None)
        assert e.value.code == code
        err = capsys.readouterr().err
        assert ("Traceback (most recent call last)" in err) is debug
        assert err.splitlines()[-2 if code != 3 else -1].startswith("error: ")
    assert "hint: check the path" in err and "/nope" in err  # a missing file: not permissions


def test_other_exceptions_are_not_swallowed():
    with pytest.raises(ZeroDivisionError):
        _failing(ZeroDivisionError("bug"))(None)


def test_debug_run_from_the_command_line_exits_with_the_error_code():
    plain = invoke("pipeline.run", "nigthly")
    debug = invoke("pipeline.run", "nigthly", PADDLECD_DEBUG="1")
    assert plain.returncode == debug.returncode == 10
    assert "Traceback" not in plain.stderr and "Traceback" in debug.stderr
    assert debug.stderr.splitlines()[-2].startswith("error: unknown pipeline 'nigthly'")


# ---------------------------------------------------------------- streams: results on stdout

def test_a_listing_is_on_stdout_and_nothing_else_is():
    run = invoke("smoke.checks", "--variant", "cpu")
    assert run.returncode == 0 and run.stderr == ""
    assert "allreduce/test_allreduce_exact_sums" in run.stdout.splitlines()


def test_a_plan_is_on_stderr(tmp_path):
    run = invoke("pipeline.run", "pr", "--dry-run", PADDLECD_STATE_DIR=str(tmp_path))
    assert run.returncode == 0 and run.stdout == ""
    assert run.stderr.startswith("pipeline pr: variants cpu")
    assert "dry run: nothing run" in run.stderr


# ---------------------------------------------------------------- package functions the tasks call

def _settings(tmp_path, **flags):
    flags = {"state_dir": str(tmp_path / "state"), "lock_file": str(tmp_path / "lock.yaml"),
             **flags}
    return config.load(flags, root=ROOT, environ={})


class _Registry:
    def __init__(self, error=None):
        self.error, self.asked = error, []

    def resolve(self, repository, reference):
        self.asked.append((repository, reference))
        if self.error:
            raise self.error
        media_type = "application/vnd.oci.image.manifest.v1+json"
        return type("Descriptor", (), {"digest": DIGEST, "media_type": media_type})()


def test_lock_dry_run_resolves_and_writes_nothing(tmp_path, monkeypatch):
    fake = _Registry()
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: fake)
    s = _settings(tmp_path)
    entries = lock.resolve(s, ["cpu", "cu126"])
    assert list(entries) == ["cpu", "cu126"] and {e.digest for e in entries.values()} == {DIGEST}
    assert fake.asked[1] == ("paddlepaddle/paddle", "3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5")
    assert not (tmp_path / "lock.yaml").exists() and not (tmp_path / "state").exists()


def test_lock_keeps_bad_input_apart_from_resolution_failures(tmp_path, monkeypatch):
    s = _settings(tmp_path)
    refusing = _Registry(ConfigError("half-set"))
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: refusing)
    with pytest.raises(ConfigError):
        lock.resolve(s, ["cpu"])
    down = _Registry(RegistryError("down"))
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: down)
    with pytest.raises(LockError, match="locking variant 'cpu': down"):
        lock.resolve(s, ["cpu"])


def test_bootstrap_plan_says_what_would_happen(tmp_path, monkeypatch):
    s = _settings(tmp_path, **{"build.debian_mirror": "http://mirror.example/debian"})
    monkeypatch.setattr(bootstrap, "base_present", lambda settings, v: False)
    line = bootstrap.plan(s, "cpu")
    assert line.startswith("dry run: base ") and "would be built (debootstrap bookworm from " \
        "http://mirror.example/debian) and pushed" in line
    monkeypatch.setattr(bootstrap, "base_present", lambda settings, v: True)
    assert bootstrap.plan(s, "cpu").endswith("is in the registry: nothing to do")
    assert "would be built" in bootstrap.plan(s, "cpu", force=True)
    with pytest.raises(ConfigError, match="has no bootstrap section"):
        bootstrap.plan(s, "cu126")


def _verified(tmp_path, checks):
    passed = all(c["passed"] for c in checks) and bool(checks)
    record = evidence.Evidence(digest=DIGEST, reference="r/p@" + DIGEST, variant="cpu",
                               passed=passed, created="2026-12-01T00:00:00Z",
                               checks=tuple(evidence.Check(**c) for c in checks))
    return smoke.Verified(reference="r/p@" + DIGEST, passed=passed, record=record,
                           evidence_path=tmp_path / "e.json", out_dir=tmp_path)


def test_a_failed_verify_is_one_error_naming_each_failed_check(tmp_path):
    """The first failed check with its message, then the others by name."""
    ok = {"name": "environment/test_import_paddle", "passed": True, "message": ""}
    assert _verified(tmp_path, [ok]).error() is None
    bad = [ok, {"name": "allreduce/test_sums", "passed": False, "message": "wrong sum\nlong trace"},
           {"name": "export/test_jit", "passed": False, "message": ""}]
    error = _verified(tmp_path, bad).error()
    assert error.exit_code == 6
    assert error.cause == (f"verify failed for r/p@{DIGEST}: "
                           "allreduce/test_sums: wrong sum; 1 more failed: export/test_jit")
    assert error.hint == f"see {tmp_path / 'smoke.log'}"
    assert _verified(tmp_path, []).error().cause.endswith("smoke suite exited non-zero")


def test_smoke_checks_are_read_from_the_files(tmp_path):
    (tmp_path / "test_a.py").write_text(
        "import pytest\n\n@pytest.mark.gpu_only\ndef test_cards():\n    pass\n\n"
        "def helper():\n    pass\n\ndef test_cpu():\n    pass\n")
    (tmp_path / "conftest.py").write_text("def test_not_a_check():\n    pass\n")
    cpu = suite.read(tmp_path, gpu=False)
    assert [(c.name, c.gpu_only, c.runs) for c in cpu] == [
        ("a/test_cards", True, False), ("a/test_cpu", False, True)]
    assert all(c.runs for c in suite.read(tmp_path, gpu=True))
    real = suite.checks(config.load(root=ROOT, environ={}), "cpu")
    assert "allreduce/test_allreduce_exact_sums" in [c.name for c in real]


def test_base_ref_default():
    assert affected.default_base_ref(None, {}) is None
    assert affected.default_base_ref(None, {"GITHUB_BASE_REF": "main"}) == "origin/main"
    assert affected.default_base_ref("origin/dev", {"GITHUB_BASE_REF": "main"}) == "origin/dev"
    assert affected.default_base_ref(None, {"GITHUB_BASE_REF": ""}) is None


def test_annotations_only_under_github_actions():
    summary = Summary(pipeline="pr", run_id="r1", status="failed", started="now", stages=(
        StageRun(name="verify", kind="verify", status="failed", variants={
            "cpu": VariantRun(status="failed", error="verify failed", hint="see log")}),))
    assert report.github_annotations(summary, {}) == []
    under_actions = report.github_annotations(summary, {"GITHUB_ACTIONS": "true"})
    assert under_actions == report.annotations(summary) != []


def test_doctor_rows_render_and_decide_the_exit():
    rows = [doctor.Check(name="engine", status="ok", detail="27.0", hint="unused"),
            doctor.Check(name="registry", status="fail", detail="down", hint="start it")]
    assert rows[0].text() == "OK    engine          27.0"
    assert rows[1].text() == "FAIL  registry        down\n      hint: start it"
    assert json.loads(rows[1].to_json()) == {"event": "check", "check": "registry",
                                             "status": "fail", "detail": "down", "hint": "start it"}
    assert doctor.verdict(rows[:1]) is None
    error = doctor.verdict(rows)
    assert isinstance(error, DoctorError) and error.cause == "doctor: 1 check(s) failed: registry"


def test_listing_a_model_that_is_not_there_is_an_error(tmp_path):
    from paddlecd.artifacts import storage
    from paddlecd.artifacts import transfer as arts

    store = storage.open_store(f"file://{tmp_path}", config.load(root=ROOT, environ={}).storage)
    assert arts.list_versions(store, "ocr-det") == []
    with pytest.raises(StorageError, match=f"no model named 'ocr-det' in file://{tmp_path}"):
        arts.list_model(store, "ocr-det")


# ---------------------------------------------------------------- --json results

def test_json_result_prints_records_as_their_json(capsys):
    from paddlecd.image.push import Pushed
    from paddlecd.release.ledger import Record

    pushed = Pushed(variant="cpu", tag="r/p:cpu-abc", digest=DIGEST, reference="r/p@" + DIGEST)
    record = Record(id="ledger.cpu.1", action="promote", variant="cpu", version="1.4.0",
                    digest=DIGEST, source="r/p@" + DIGEST, target="r/rel", tags=("1.4.0-cpu",))
    common.json_result([{"pushed": pushed, "release": record}])
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["pushed"] == {"variant": "cpu", "tag": "r/p:cpu-abc", "digest": DIGEST,
                             "reference": "r/p@" + DIGEST, "provenance": None}
    assert doc["release"]["schema"] == 1 and doc["release"]["tags"] == ["1.4.0-cpu"]


def test_artifacts_list_json_is_the_versions_on_stdout(tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    # a real PIR program (upload reads its InputSpec); the parameters are stand-ins
    (out / "model.json").write_bytes((ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    (out / "model.pdiparams").write_bytes(b"\0" * 64)
    store = f"file://{tmp_path / 'store'}"
    keys.keygen(tmp_path / "state" / "keys")  # the embedded default signs with the state's pair
    up = invoke("upload", "--model-dir", str(out / "model"), "--name", "demo", "--version", "1.0.0",
                "--to", store, PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith(f"uploaded: {store}/demo/1.0.0") and "plan: create" in up.stderr
    listed = invoke("artifacts.list", f"{store}/demo", "--json",
                    PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["name"] == "demo" and [v["version"] for v in doc["versions"]] == ["1.0.0"]
    assert doc["versions"][0]["files"] == 2 and doc["versions"][0]["complete"] is True


def test_upload_json_is_the_uploaded_version_on_stdout(tmp_path):
    import hashlib

    out = tmp_path / "export"
    out.mkdir()
    # a real PIR program (paddle.jit.save, tests/data/artifacts): upload reads its InputSpec
    (out / "model.json").write_bytes((ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    (out / "model.pdiparams").write_bytes(b"\1" * 64)
    store, state = tmp_path / "store", str(tmp_path / "state")
    keys.keygen(tmp_path / "state" / "keys")  # the embedded default signs with the state's pair
    args = ("upload", "--model-dir", str(out / "model"), "--name", "demo", "--version", "1.0.0",
            "--to", f"file://{store}", "--json")
    dry = invoke(*args, "--dry-run", PADDLECD_STATE_DIR=state)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)  # exactly one document: the plan went to stderr
    assert planned["action"] == "create" and planned["executed"] is False
    assert planned["manifest_digest"] is None and planned["bytes_moved"] == 0
    assert "plan: create" in dry.stderr and not store.exists()
    done = invoke(*args, PADDLECD_STATE_DIR=state)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    size = sum(f.stat().st_size for f in out.iterdir())
    stored = (store / "demo/1.0.0/manifest.json").read_bytes()
    assert doc == {"url": f"file://{store}/demo/1.0.0", "name": "demo", "version": "1.0.0",
                   "action": "create", "executed": True, "files": 2, "bytes": size,
                   "bytes_moved": size, "image_digest": None,
                   "manifest_digest": "sha256:" + hashlib.sha256(stored).hexdigest()}
    again = json.loads(invoke(*args, PADDLECD_STATE_DIR=state).stdout)
    assert again["action"] == "unchanged" and again["bytes_moved"] == 0
    assert again["manifest_digest"] == doc["manifest_digest"]


def test_upload_json_errors_stay_on_stderr(tmp_path):
    bad = invoke("upload", "--model-dir", str(tmp_path), "--name", "Demo", "--version", "1.0.0",
                 "--to", f"file://{tmp_path / 'store'}", "--json",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert bad.returncode == 2 and bad.stdout == "" and "error:" in bad.stderr


def test_demo_reads_only_keys_the_json_results_have():
    """scripts/demo.sh reads each task's --json document with `field KEY <<<"$VAR"`:
    every key it reads must be one the record printed by that task has."""
    import dataclasses
    import re

    from paddlecd.artifacts.transfer import Uploaded
    from paddlecd.deployment import Deployed
    from paddlecd.image.push import Pushed
    from paddlecd.release.promote import Released

    def keys(cls, **extra):
        return {f.name for f in dataclasses.fields(cls)} | set(extra)

    docs = {"PUSHED": keys(Pushed), "EVIDENCE": keys(evidence.Evidence, schema=1),
            "PROMOTED": keys(Released, release=1), "DEPLOYED": keys(Deployed),
            "UPLOADED": keys(Uploaded)}
    released = Released(
        action="promote",
        variant="cpu",
        version="1.0.0",
        digest=DIGEST,
        reference="r/p@" + DIGEST,
        executed=True,
    )
    assert set(released.to_json()) == docs["PROMOTED"]
    script = (ROOT / "scripts/demo.sh").read_text()
    reads = re.findall(r'field (\w+) <<<"\$(\w+)"', script)
    assert {var for _, var in reads} == set(docs)  # every document is read
    for key, var in reads:
        assert key in docs[var], f"demo.sh reads {key!r} from {var}, which has {sorted(docs[var])}"
    for var in docs:
        assert f"{var}=$($INV " in script and "--json" in script.split(f"{var}=$($INV ")[1][:200]


def test_a_full_disk_is_named_as_one_not_as_permissions(tmp_path):
    """A trial: a full disk was reported with a hint about permissions. Trial 21: the df it
    printed named a file the failed write had removed (df failed): the nearest folder there."""
    import errno

    from paddlecd.cli import common

    gone = tmp_path / "out" / "x.yaml"
    cause, hint = common.os_error_text(OSError(errno.ENOSPC, "No space left on device", str(gone)))
    assert cause == f"no space left on the device: {gone}" and f"(df -h {tmp_path})" in hint
    cause, hint = common.os_error_text(PermissionError(errno.EACCES, "Permission denied", "/s"))
    assert cause == "Permission denied: /s" and "permissions" in hint


# ---------------------------------------------------------------- command lines Invoke refuses

def test_an_empty_one_letter_flag_is_named_as_invoke_spells_it():
    """A trial: ``release.compare -a ''`` said "--a is empty"; the flag is ``-a``."""
    with pytest.raises(ConfigError, match="^-a is empty$"):
        common._refuse_empty({"a": "", "b": "x"})
    with pytest.raises(ConfigError, match="^--dry-run is empty$"):
        common._refuse_empty({"dry_run": " "})


@pytest.mark.parametrize(("line", "cause", "hint"), [
    (["promote", "--verison", "1.0.0"], "promote: unknown flag '--verison'",
     "did you mean --version? see: invoke --help promote"),
    (["build", "push", "verify", "--variant", "cpu", "--jsno"], "verify: unknown flag '--jsno'",
     "did you mean --json? see: invoke --help verify"),
    (["verify", "--bogus"], "verify: unknown flag '--bogus'", "see: invoke --help verify"),
    (["release.rollback", "--to"], "release.rollback: --to needs a value",
     "e.g. --to=VALUE; see: invoke --help release.rollback"),
    (["release.rollback", "0.1.0"],
     "release.rollback: unexpected argument '0.1.0' (it takes flags only)",
     "name it with its flag; see: invoke --help release.rollback"),
    (["promote", "--dry-run=3"], "promote: --dry-run takes no value (given '3')",
     "write --dry-run alone; see: invoke --help promote"),
    (["promot"], "no task named 'promot'", "did you mean promote? see: invoke --list"),
    (["--help", "promot"], "no task named 'promot'", "did you mean promote? see: invoke --list"),
    (["release.show"], "release.show: missing its argument version",
     "e.g. invoke release.show <version>; see: invoke --help release.show"),
    (["release.show", "1.0.0", "2.0.0"],
     "release.show: unexpected argument '2.0.0' (it takes one argument: version)",
     "name it with its flag; see: invoke --help release.show"),
    (["promote", "--variant", "cpu", "--variant", "cu126"], "promote: --variant is given twice",
     "give it once; see: invoke --help promote"),
    # trial 12: Invoke took --out for the positional dest and the value was "unexpected"
    (["artifacts.download", "m@1.0.0", "--out", "/tmp/d"], "artifacts.download: unknown flag "
     "'--out'", "see: invoke --help artifacts.download"),
    (["artifacts.download", "m@1.0.0", "--outdir=/tmp/d"], "artifacts.download: unknown flag "
     "'--outdir'", "see: invoke --help artifacts.download"),
    # trial 11: the = form said "--variant takes no value (given 'cu126')"
    (["release.list", "--variant=cpu", "--variant=cu126"],
     "release.list: --variant is given twice", "give it once; see: invoke --help release.list"),
    (["release.prune", "--dry-run", "--variant=cpu", "--variant", "cpu"],
     "release.prune: --variant is given twice", "give it once; see: invoke --help release.prune"),
    (["--lsit"], "unknown option '--lsit'", "did you mean --list? see: invoke --help"),
])
def test_a_command_line_invoke_refuses_is_named_with_a_hint(line, cause, hint):
    assert argv.parse_problem(["invoke", *line], ns) == (cause, hint)


@pytest.mark.parametrize("line", [
    ["build", "push", "verify", "--variant", "cpu"], ["--list"], ["-l", "release"],
    ["--help", "promote"], ["promote", "--help"], ["evidence.show", "1.0.0-cpu"],
    ["promote", "--variant=cpu", "--version", "1.0.0", "--dry-run"],
    ["--complete", "--", "invoke", "prom"],
])
def test_a_command_line_invoke_reads_is_left_alone(line):
    assert argv.parse_problem(["invoke", *line], ns) is None


def test_an_unknown_flag_exits_2_with_the_hint_from_the_command_line():
    run = invoke("release.list", "--jsno")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == ["error: release.list: unknown flag '--jsno'",
                                       "hint: did you mean --json? see: invoke --help release.list"]


def test_a_smoke_check_the_report_lacks_is_a_failed_check(tmp_path):
    """Trial 4: an image's PYTEST_ADDOPTS deselected the export check and verify passed with
    "8 passed, 2 skipped"; a check of smoke/ the report does not hold fails the run."""
    s = config.load({"state_dir": str(tmp_path / "s")}, root=ROOT, environ={})
    every = [c.name for c in suite.read(ROOT / "smoke", gpu=False)]
    reported = [evidence.Check(name=n, passed=True) for n in every
                if n != "export/test_jit_save_load_and_inference"]
    missing = smoke.not_run(s, reported, gpu=False)
    assert [(c.name, c.passed) for c in missing] == [
        ("export/test_jit_save_load_and_inference", False)]
    assert "deselected or not collected" in missing[0].message
    cases = [evidence.Check(name=f"{n}[2]", passed=True) for n in every]  # parametrized
    assert smoke.not_run(s, cases, gpu=False) == []


def test_a_suite_that_wrote_no_report_says_so_in_one_line(tmp_path, monkeypatch):
    """Trial 4: an image whose pytest wrote no junit.xml was "smoke suite did not run (exit 0)"
    though pytest printed "9 passed, 2 skipped", with 8 lines of output in the hint (so the
    error was not the last two lines). The engine is replaced: this is the judging, not the run."""
    import contextlib
    import types

    from paddlecd import engine
    from paddlecd.errors import VerifyError

    monkeypatch.setattr(engine, "remove_containers", lambda labels: [])
    monkeypatch.setattr(engine, "container", lambda spec: contextlib.nullcontext(None))
    monkeypatch.setattr(engine, "wait", lambda c, **kw: types.SimpleNamespace(
        exit_code=0, logs="collected 11 items\n\n9 passed, 2 skipped in 20.1s\n\n"))
    s = config.load({"state_dir": str(tmp_path / "s")}, root=ROOT, environ={})
    with pytest.raises(VerifyError) as e:
        smoke._one_container(s, "r@sha256:" + "a" * 64, {}, tmp_path, None, key=tmp_path)
    assert e.value.cause == ("the smoke suite wrote no junit.xml in r@sha256:" + "a" * 64
                             + " (container exit 0; last line: '9 passed, 2 skipped in 20.1s')")
    assert e.value.hint == f"see {tmp_path / 'smoke.log'}"
    assert "9 passed" in (tmp_path / "smoke.log").read_text()


def test_a_failed_run_s_smoke_log_is_kept_where_its_hint_points(tmp_path, monkeypatch):
    """Trial 16: the hint said "see <state>/verify/.image-….run/smoke.log", a folder removed
    with the failed run; the log now goes to <state>/logs and the hint names it there. The
    engine is replaced as above; the previous run's folder stays whole."""
    import contextlib
    import types

    from paddlecd import engine
    from paddlecd.errors import VerifyError

    monkeypatch.setattr(engine, "remove_containers", lambda labels: [])
    monkeypatch.setattr(engine, "live_owners", lambda labels: [])
    monkeypatch.setattr(engine, "remove_orphans", lambda labels: [])
    monkeypatch.setattr(engine, "container", lambda spec: contextlib.nullcontext(None))
    monkeypatch.setattr(engine, "wait", lambda c, **kw: types.SimpleNamespace(
        exit_code=1, logs="/opt/paddle/bin/python3: No module named pytest\n"))
    s = config.load({"state_dir": str(tmp_path / "s")}, root=ROOT, environ={})
    out = s.state / "verify" / "image-aaaaaaaaaaaa"
    out.mkdir(parents=True)
    (out / "junit.xml").write_text("<testsuite/>")  # the previous run's
    with pytest.raises(VerifyError) as e:
        smoke._run_staged(s, "r@sha256:" + "a" * 64, {}, out, nodes=1, cluster_k8s=False,
                          gpus_per_node=None, kind="job", driver=None, on_line=None,
                          on_event=None)
    kept = Path(e.value.hint.removeprefix("see "))
    assert kept.parent == s.state / "logs" and "No module named pytest" in kept.read_text()
    assert (out / "junit.xml").read_text() == "<testsuite/>"
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no staging folder left


def test_no_task_takes_invokes_own_short_flags():
    """A trial: ``release.compare``'s help offered ``-h STRING, --history=STRING``; ``-h cpu``
    printed the help (Invoke's -h), exit 0, and drew nothing. No flag gets -h or -V."""
    seen = []
    for name in ns.task_names:
        task = ns[name]
        saved = dict(task.help)  # get_arguments pops the help texts
        try:
            names = {n for a in task.get_arguments() for n in a.names}
        finally:
            task.help = saved
        seen.append(name)
        assert not names & {"h", "V"}, (name, sorted(names))
    assert "release.compare" in seen
    assert "-i STRING, --history=STRING" in invoke("--help", "release.compare").stdout


@pytest.mark.parametrize("args", [
    ("release.list", "--variant", "c\x1b[2Jpu"),
    ("pipeline.run", "p\x1b[2Jr\u202e"),
    ("upload", "--model-dir", "/tmp/paddlecd-nosuch-\x1b[2J", "--name", "m", "--version", "1.0.0",
     "--to", "file:///tmp/paddlecd-nosuch-store"),
])
def test_control_characters_of_an_input_are_escaped_in_errors(args, tmp_path):
    """A trial: an ESC in a variant, pipeline name or path was echoed raw by the error (on a
    terminal ``\\x1b[2J`` clears the screen); a U+202E turns the rest of a line around."""
    done = invoke(*args, PADDLECD_STATE_DIR=str(tmp_path))
    assert done.returncode != 0 and "error:" in done.stderr
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr, done.stderr
    assert "\\x1b[2J" in done.stderr, done.stderr


def test_json_given_to_two_tasks_on_one_line_is_refused(tmp_path):
    """Trial 9: ``push --dry-run --json promote … --json`` printed two JSON documents on stdout
    (README: --json makes stdout exactly one). Refused before any task runs; one is fine."""
    run = invoke("push", "--dry-run", "--json", "promote", "--version", "1.2.0", "--dry-run",
                 "--json", "--variant", "cpu", PADDLECD_STATE_DIR=str(tmp_path))
    assert run.returncode == 2 and run.stdout == "", run.stderr
    assert "error: --json is given to push, promote on a command line of 2 tasks" in run.stderr
    # trial 10: a task without --json beside one with it printed text after the document
    assert "on a command line of 2 tasks" in argv.json_twice(
        ["invoke", "release.list", "--json", "smoke.checks"], ns)[0]
    assert argv.json_twice(["invoke", "release.list", "--json", "--variant", "cpu"], ns) is None
    assert argv.json_twice(["invoke", "build", "push"], ns) is None


@pytest.mark.parametrize("proxy", ["http://bad proxy:3128", "http://127.0.0.1:1",
                                   "socks5://127.0.0.1:1"])
def test_a_proxy_that_fails_is_named_not_the_registry(tmp_path, proxy):
    """Trial 9: a refused HTTP_PROXY read "registry … unreachable — is it running?", a malformed
    one "Failed to parse … hint: check the path" (exit 2), a SOCKS one "Missing dependencies for
    SOCKS support". The proxy and its variable are named, with NO_PROXY as the way around."""
    run = invoke("release.list", "--variant", "cpu", HTTP_PROXY=proxy, NO_PROXY="",
                 no_proxy="", PADDLECD_REGISTRY_URL="127.0.0.1:9",
                 PADDLECD_REGISTRY_INSECURE="true", PADDLECD_STATE_DIR=str(tmp_path))
    assert run.returncode == 5, run.stderr
    assert f"the proxy {proxy} (HTTP_PROXY) failed" in run.stderr
    assert "hint: fix or unset HTTP_PROXY, or add 127.0.0.1 to NO_PROXY" in run.stderr


def test_a_proxys_password_is_never_printed_and_requests_rules_name_it(tmp_path):
    """Trial 10: a proxy's user:password was printed in the error; and a NO_PROXY entry
    ``127.0.0.1:9`` (which requests does not match for an IP host) made the error blame the
    registry ("check registry.url")."""
    base = {"PADDLECD_REGISTRY_URL": "127.0.0.1:9", "PADDLECD_REGISTRY_INSECURE": "true",
            "PADDLECD_STATE_DIR": str(tmp_path)}
    run = invoke("release.list", "--variant", "cpu", NO_PROXY="", no_proxy="",
                 HTTP_PROXY="http://user:s3cr3tpw@127.0.0.1:1", **base)
    assert run.returncode == 5 and "s3cr3tpw" not in run.stdout + run.stderr, run.stderr
    assert "the proxy http://***@127.0.0.1:1 (HTTP_PROXY) failed" in run.stderr
    run = invoke("release.list", "--variant", "cpu", NO_PROXY="127.0.0.1:9", no_proxy="",
                 HTTP_PROXY="http://127.0.0.1:1", **base)
    assert "the proxy http://127.0.0.1:1 (HTTP_PROXY) failed" in run.stderr, run.stderr
    assert "a host without its port" in run.stderr


def test_smoke_checks_takes_the_lines_shared_variant(tmp_path):
    """Trial 10: ``smoke.checks release.list -v cu126`` showed the cpu view: smoke.checks had a
    default of its own, so the shared variant was never asked."""
    shared = invoke("smoke.checks", "release.list", "-v", "cu126", PADDLECD_STATE_DIR=str(tmp_path),
                    PADDLECD_REGISTRY_URL="127.0.0.1:9")
    alone = invoke("smoke.checks", "--variant", "cu126", PADDLECD_STATE_DIR=str(tmp_path))
    cpu = invoke("smoke.checks", PADDLECD_STATE_DIR=str(tmp_path))
    assert "(GPU-only)" in alone.stdout and "skipped on this variant" in cpu.stdout
    assert shared.stdout.startswith(alone.stdout), shared.stdout


@pytest.mark.parametrize(("flag", "value", "setting"), [
    ("keep-days", "99999999999", "retention.keep_days"), ("keep-days", "36501",
                                                          "retention.keep_days"),
    ("keep-last", "99999999999", "retention.keep_last"), ("keep-days", "0", "retention.keep_days"),
])
def test_a_flag_that_overrides_a_setting_has_the_settings_bounds(flag, value, setting):
    """Trial 11: ``release.prune --keep-days 99999999999 --dry-run`` planned (exit 0), where
    PADDLECD_RETENTION_KEEP_DAYS=36501 is refused (1..36500)."""
    with pytest.raises(ConfigError, match=rf"--{flag} {value} is outside 1\.\.") as e:
        common.count(flag, value, bound=setting)
    assert setting in e.value.hint
    assert common.count(flag, "30", bound=setting) == 30


def test_a_ctrl_c_while_a_pool_starts_a_thread_ends_without_a_traceback(monkeypatch):
    """Trial 16: 1 Ctrl-C of upload in 9 printed its one line, then a traceback "cannot join
    thread before it is started": the pool's thread was listed (threading's limbo) unstarted."""
    import threading

    from paddlecd.cli import common

    unstarted = threading.Thread(target=lambda: None)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread(), unstarted])
    common._end_if_threads_hang(130, grace=0.1)  # returns: nothing left running
