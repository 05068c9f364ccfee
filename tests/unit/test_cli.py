"""The command line as a user meets it: --help on every task, one-line errors for bad paths and
mismatched configuration, no traceback. Runs `invoke` in a subprocess; no services needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError, PaddlecdError
from paddlecd.image import lock
from paddlecd.image import push as publish
from paddlecd.signing import keys

from support import ROOT, invoke


@pytest.mark.parametrize(
    "task",
    ["artifacts.list", "artifacts.download", "release.show", "pipeline.run", "build", "lock"],
)
def test_help_after_the_task_name_shows_help_even_with_positional_arguments(task):
    run = invoke(task, "--help")
    assert run.returncode == 0 and run.stdout.startswith(
        f"Usage: inv[oke] [--core-opts] {task}"
    ), run.stderr


@pytest.mark.parametrize("line", [["release.prune", "--help"], ["--help", "image.build"],
                                  ["artifacts.list", "--help"]])
def test_help_prints_what_the_cli_reference_says_flag_words_included(line):
    """Trial 7: ``invoke <task> --help`` listed every flag with no words (the command-line check
    built Invoke's parser first, which pops each flag's help), while docs/reference/cli.md, made
    in-process, had them."""
    from paddlecd.cli import reference

    task = next(x for x in line if x != "--help")
    run = invoke(*line)
    assert run.returncode == 0, run.stderr
    usage = f"Usage: inv[oke] [--core-opts] {task}"
    assert run.stdout.rstrip() == reference.task_help(task).rstrip().replace(
        f"Usage: invoke [--core-opts] {task}", usage)
    flags = [x for x in run.stdout.split("Options:")[1].splitlines() if x.startswith("  -")]
    assert flags and all(len(x.split("   ")) > 1 for x in flags), flags  # each with its words


def test_an_unwritable_output_path_is_one_line_not_a_traceback(tmp_path):
    image = "127.0.0.1:5000/p/q@sha256:" + "a" * 64
    run = invoke(
        "cluster.render",
        "--image",
        image,
        "--job",
        "examples/train.yaml",
        "--out",
        "/proc/paddlecd-nope/x",
        PADDLECD_STATE_DIR=str(tmp_path),
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("error: ") and "/proc/paddlecd-nope" in run.stderr


def test_push_refuses_a_build_tagged_for_another_registry(tmp_path):
    s = config.load(
        {"state_dir": str(tmp_path), "registry.url": "registry.example:5000"}, root=ROOT, environ={}
    )
    (tmp_path / "builds").mkdir()
    (tmp_path / "builds" / "cpu.json").write_text(
        json.dumps({"tag": "127.0.0.1:5000/paddlecd/paddle:cpu-abc1234", "base": "b@sha256:1"})
    )
    with pytest.raises(ConfigError) as e:
        publish.last_build(s, "cpu")
    assert (
        "not for registry.example:5000/paddlecd/paddle" in e.value.cause
        and "invoke build push" in e.value.hint
    )


@pytest.mark.parametrize(("text", "why"), [
    ('{"a":', "not JSON: it ends mid-document at line 1 (cut short?)"),
    ("", "empty"), ("[1]", "not a build record (a JSON object)"),
    ("{}", "'tag' is missing or not a string"),
    ('{"tag": "r:t", "base": 5}', "'base' is missing or not a string")])
def test_push_names_a_broken_build_record(tmp_path, text, why):
    """Trial 4: push (and its --dry-run) gave JSONDecodeError, TypeError and KeyError tracebacks
    for a builds/<variant>.json that was cut, a list or empty."""
    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    (tmp_path / "builds").mkdir()
    (tmp_path / "builds" / "cpu.json").write_text(text)
    with pytest.raises(ConfigError) as e:
        publish.last_build(s, "cpu")
    assert e.value.cause.startswith(f"{tmp_path / 'builds' / 'cpu.json'}: {why}")
    assert e.value.hint == "build again: invoke build --variant cpu"


def _built(tmp_path, monkeypatch, *, now: str = "sha256:" + "1" * 64):
    """Settings whose state folder records a build of cpu (image sha256:11…); the engine's image
    under its tag is ``now`` (given: no engine runs in the unit suite)."""
    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    (tmp_path / "builds").mkdir()
    (tmp_path / "builds" / "cpu.json").write_text(
        json.dumps({"tag": f"{s.candidate_repo}:cpu-abc1234", "base": "b@sha256:1",
                    "image_id": "sha256:" + "1" * 64}))
    monkeypatch.setattr(publish.engine, "image_exists", lambda tag: True)
    monkeypatch.setattr(publish.engine, "image_id", lambda tag: now)
    return s


@pytest.mark.parametrize(("env", "named"), [
    ({"PADDLECD_REGISTRY_USERNAME": "u", "PADDLECD_REGISTRY_PASSWORD": ""},
     "$PADDLECD_REGISTRY_PASSWORD is set but empty"),
    ({"PADDLECD_REGISTRY_USERNAME": "", "PADDLECD_REGISTRY_PASSWORD": ""},
     "$PADDLECD_REGISTRY_USERNAME is set but empty"),
    ({"PADDLECD_REGISTRY_PASSWORD": "hunter2-secret"}, "only one of PADDLECD_REGISTRY_USERNAME"),
    ({"PADDLECD_SIGNING_KEY": ""}, "$PADDLECD_SIGNING_KEY is set but empty"),
    ({"PADDLECD_SIGNING_KEY": "garbage"}, "$PADDLECD_SIGNING_KEY is not an unencrypted PEM"),
])
def test_push_dry_run_refuses_what_the_push_would(tmp_path, monkeypatch, env, named):
    """Trial 7: ``push --dry-run`` said "would push" with half a credential pair and with a
    garbage key, which the push then refused; an empty key or pair (an unset CI secret) was
    taken as none, and the state folder's pair or config.json was used without a word."""
    s = _built(tmp_path, monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(PaddlecdError) as e:
        publish.preflight(s, "cpu")
    assert e.value.cause.startswith(named) and "hunter2" not in str(e.value) + e.value.hint


def test_push_dry_run_json_prints_the_plan_as_one_document(tmp_path, monkeypatch, capsys):
    """Trial 7: ``push --dry-run --json`` printed nothing on stdout (the plan only on stderr),
    while docs/configuration.md promises the plan as one JSON document."""
    from invoke import Context

    from paddlecd.cli import image as image_cli

    monkeypatch.setenv("PADDLECD_STATE_DIR", str(tmp_path))
    s = _built(tmp_path, monkeypatch)
    image_cli.push(Context(), variant="cpu", dry_run=True, json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["executed"] is False and doc["tag"] == f"{s.candidate_repo}:cpu-abc1234"


def test_a_build_tag_moved_to_another_image_is_not_pushed(tmp_path, monkeypatch):
    """Trial 16: ``docker tag <the base> <the build's tag>`` then ``push`` pushed the base as the
    cpu candidate and signed a provenance saying it was built FROM itself. The engine's image
    here is given (tests/integration/test_build_push_verify.py pushes real builds)."""
    s = _built(tmp_path, monkeypatch, now="sha256:" + "2" * 64)
    with pytest.raises(ConfigError) as e:
        publish.preflight(s, "cpu")
    assert e.value.cause == (f"{s.candidate_repo}:cpu-abc1234 now names image sha256:222222222222…"
                             ", not the last build of 'cpu' (sha256:111111111111…): the tag was "
                             "moved since the build")
    assert not (tmp_path / "candidates").exists()


def test_an_empty_project_root_variable_is_refused(monkeypatch):
    monkeypatch.setenv("PADDLECD_ROOT", "")
    with pytest.raises(ConfigError, match=r"^\$PADDLECD_ROOT is set but empty"):
        config.find_root()


def test_relocking_an_unchanged_pin_keeps_the_entry(tmp_path, monkeypatch):
    from dataclasses import dataclass

    @dataclass
    class D:
        digest: str = "sha256:" + "c" * 64
        media_type: str = "application/vnd.oci.image.manifest.v1+json"

    class C:
        def resolve(self, repository, reference):
            return D()

    vfile = tmp_path / "v.yaml"
    vfile.write_text("variants: {a: {device: cpu, base: 'reg.example/p/b:3.0.0', paddle: '3.0.0'}}")
    s = config.load(
        # state_dir too: lock() rewrites <state>/lock.local.yaml, and the default state is the
        # checkout's .paddlecd (it dropped the demo's bootstrapped cpu pin there)
        {"variants_file": str(vfile), "lock_file": str(tmp_path / "lock.yaml"),
         "state_dir": str(tmp_path / "state")},
        root=ROOT,
        environ={},
    )
    monkeypatch.setattr(lock.registry, "client_for", lambda settings, reg=None: C())
    lock.lock(s)
    first = (tmp_path / "lock.yaml").read_text()
    lock.lock(s)
    assert (tmp_path / "lock.yaml").read_text() == first


@pytest.mark.parametrize(
    "edit,fragment",
    [
        (("script: train_linear.py", "script: missing.py"), "missing.py does not exist"),
        (
            (
                "  path: .\n  mountPath: /workspace/examples",
                "  path: /nonexistent-code\n  mountPath: /workspace/examples",
            ),
            "code.path /nonexistent-code is not a folder",
        ),
        (
            ("  path: ../.paddlecd/train-output", "  path: ../../../../../../../../etc"),
            "output.path resolves to /etc, which is inside the system folder /etc",
        ),
        (  # trial 7: a file passed the dry run; the real run started the job, which failed
            ("  path: ../.paddlecd/train-output", f"  path: {ROOT / 'README.md'}"),
            f"output.path {ROOT / 'README.md'} is a file, not a folder",
        ),
    ],
)
def test_local_deploy_checks_host_folders_before_creating_anything(tmp_path, edit, fragment):
    """The job file is a copy of examples/train.yaml in tmp_path (never in the checkout: the
    suite's tests write only under their own tmp_path), its relative folders made absolute."""
    job = (ROOT / "examples/train.yaml").read_text()
    assert edit[0] in job
    job = job.replace(edit[0], edit[1]).replace(
        "  path: .\n", f"  path: {ROOT / 'examples'}\n"
    ).replace("  path: ../.paddlecd/train-output", f"  path: {tmp_path / 'out'}")
    path = tmp_path / "train.yaml"
    path.write_text(job)
    run = invoke(
        "deploy",
        "--image",
        "127.0.0.1:5000/p/q@sha256:" + "a" * 64,
        "--job",
        str(path),
        "--dry-run",
    )
    assert run.returncode == 2 and fragment in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_upload_takes_the_model_prefix_deploy_prints(tmp_path):
    """deploy prints `model: <output>/model` (the jit.save prefix); upload must take it as it is.
    (File contents are stand-ins: upload checks names and hashes, not Paddle formats.)"""
    out = tmp_path / "train-output"
    out.mkdir()
    # a PIR program written by paddle.jit.save: upload reads its InputSpec (issue 13)
    (out / "model.json").write_bytes((ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    (out / "model.pdiparams").write_bytes(b"\0" * 64)
    (out / "notes.txt").write_text("train log")  # a trial: left out without a word
    (out / "model.pdopt").write_bytes(b"\0")
    (out / "checkpoints").mkdir()  # trial 7: a sub-folder was left out without a word
    store = tmp_path / "store"
    keys.keygen(tmp_path / "state" / "keys")  # the embedded default signs with the state's pair
    run = invoke(
        "upload",
        "--model-dir",
        str(out / "model"),
        "--name",
        "demo",
        "--version",
        "1.0.0",
        "--to",
        f"file://{store}",
        PADDLECD_STATE_DIR=str(tmp_path / "state"),
    )
    assert run.returncode == 0, run.stderr
    assert (f"warning: {out}: 3 entries not part of the jit.save export are not uploaded: "
            "checkpoints/, model.pdopt, notes.txt\nhint: only the export's files are stored"
            ) in run.stderr
    assert sorted(p.name for p in (store / "demo" / "1.0.0").iterdir()) == [
        "manifest.json",
        "model.json",
        "model.pdiparams",
        "model.sig",
    ]
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("mine")
    run = invoke("artifacts.download", "--url", f"file://{store}/demo/1.0.0", "--dest", str(busy),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    # trial 19: off a terminal the progress bar wrote an empty line before the error
    assert run.returncode == 2 and run.stderr.startswith(
        f"error: destination {busy} exists and is not an empty folder\n"), repr(run.stderr)


def _export_leaking(tmp_path: Path) -> tuple[Path, Path]:
    """A PIR export whose model.pdiparams links to a secret outside its folder."""
    out = tmp_path / "export"
    out.mkdir()
    (out / "model.json").write_bytes((ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    secret = tmp_path / "secret" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:$6$not-for-upload")
    (out / "model.pdiparams").symlink_to(secret)
    return out, secret


@pytest.mark.parametrize("dry_run", [False, True])
def test_upload_refuses_a_symlink_out_of_the_export_and_writes_nothing(tmp_path, dry_run):
    out, secret = _export_leaking(tmp_path)
    store = tmp_path / "store"
    run = invoke("upload", "--model-dir", str(out), "--name", "demo", "--version", "1.0.0",
                 "--to", f"file://{store}", *(["--dry-run"] if dry_run else []),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{out}/model.pdiparams is a symlink to {secret}, outside the export" in run.stderr
    assert "Traceback" not in run.stderr and "not-for-upload" not in run.stdout + run.stderr
    assert not store.exists()


def test_upload_refuses_dot_dot_in_an_s3_prefix_before_any_request(tmp_path):
    """`s3://bucket/../x` wrote objects under the key `../x/`: S3 keys are not normalised."""
    out, _ = _export_leaking(tmp_path)
    run = invoke("upload", "--model-dir", str(out), "--name", "demo", "--version", "1.0.0",
                 "--to", "s3://models/../x", PADDLECD_STORAGE_ENDPOINT_URL="http://127.0.0.1:1",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "store URL 's3://models/../x' has a '.' or '..' segment" in run.stderr


def test_upload_re_checks_links_after_its_plan(tmp_path):
    """A file swapped for a link between the plan (shown to the user) and the upload is refused."""
    from paddlecd.artifacts import storage
    from paddlecd.artifacts import transfer as arts
    from paddlecd.errors import ConfigError

    out, secret = _export_leaking(tmp_path)
    (out / "model.pdiparams").unlink()
    (out / "model.pdiparams").write_bytes(b"\0" * 64)
    store = storage.FileStore(tmp_path / "store")
    plan = arts.plan_upload(store, out, name="demo", version="1.0.0")
    (out / "model.pdiparams").unlink()
    (out / "model.pdiparams").symlink_to(secret)
    with pytest.raises(ConfigError, match="is a symlink to .*outside the export folder"):
        arts.upload(store, plan)
    assert not (tmp_path / "store").exists()


def test_check_refuses_a_symlink_out_of_the_export_before_it_runs_anything(tmp_path):
    out, secret = _export_leaking(tmp_path)
    run = invoke("artifacts.check", str(out), "--image", "127.0.0.1:1/p/q@sha256:" + "a" * 64,
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{out}/model.pdiparams is a symlink to {secret}" in run.stderr
    assert not (out / "check.json").exists()


def test_local_deploy_never_re_owns_an_existing_output_folder(tmp_path):
    from paddlecd.cluster import local
    from paddlecd.cluster.jobfile import Volume
    from paddlecd.errors import ClusterError

    mine = tmp_path / "private"
    mine.mkdir(mode=0o700)
    before = mine.stat()
    with pytest.raises(ClusterError) as e:
        local._prepare_output(Volume("/output", path=str(mine)), 1000)
    assert "cannot write it" in e.value.cause
    after = mine.stat()
    assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode)
    fresh = tmp_path / "new" / "out"
    local._prepare_output(Volume("/output", path=str(fresh)), 1000)
    assert fresh.is_dir() and (fresh.stat().st_uid == 1000 or fresh.stat().st_mode & 0o002)


def test_an_unreachable_kubernetes_api_is_one_line_exit_9(tmp_path):
    """No API server runs here: a kubeconfig pointing at a closed local port stands in for a cluster
    that is down; nothing can be created, and the user gets one line, not urllib3's traceback."""
    from paddlecd.registry.embedded import free_port

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{free_port()}",
                               insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: not-a-secret}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    run = invoke(
        "deploy",
        "--image",
        "127.0.0.1:5000/p/q@sha256:" + "a" * 64,
        "--job",
        "examples/train.yaml",
        "--cluster",
        "k8s",
        KUBECONFIG=str(kubeconfig),
        PADDLECD_STATE_DIR=str(tmp_path / "state"),  # the deploy stage's log goes there
    )
    assert run.returncode == 9 and "Traceback" not in run.stderr
    assert "Kubernetes API server https://127.0.0.1:" in run.stderr and "unreachable" in run.stderr


def test_the_release_pipeline_refuses_two_variants_before_anything_runs(tmp_path):
    run = invoke(
        "pipeline.run",
        "release",
        "--variant",
        "cpu",
        "--variant",
        "cu126",
        "--version",
        "2.0.0",
        PADDLECD_STATE_DIR=str(tmp_path),
    )
    assert run.returncode == 2 and "runs one variant at a time" in run.stderr
    assert not (tmp_path / "pipelines").exists()


@pytest.mark.parametrize("args,fragment", [
    (("pr", "--version", "1.0.0"), "pipeline 'pr' has none"),
    (("release", "--version", "1.0.0", "--bump", "patch"), "not both"),
    (("release", "--bump", "huge"), "not major, minor or patch"),
    (("release", "--digest", "sha256:abc"), "is not sha256:<64 hex>"),
    (("release", "--version", "v1.0.0"), "no 'v' prefix"),
])
def test_pipeline_promote_options_are_checked_before_anything_runs(tmp_path, args, fragment):
    run = invoke("pipeline.run", *args, "--dry-run", PADDLECD_STATE_DIR=str(tmp_path))
    assert run.returncode == 2 and fragment in run.stderr, run.stderr


def test_a_kubernetes_hostpath_model_is_not_taken_for_a_local_folder(tmp_path):
    """On k8s a `path:` output is a hostPath on some node: upload must not read this machine's
    folder."""
    from paddlecd.deployment import stage as deploy

    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    image = "127.0.0.1:5000/p/q@sha256:" + "a" * 64
    k8s = deploy.plan(s, job=str(ROOT / "examples/train.yaml"), image=image, cluster="k8s")
    local = deploy.plan(s, job=str(ROOT / "examples/train.yaml"), image=image, cluster="local")
    assert k8s.model_location.startswith("node:") and not local.model_location.startswith("node:")


def test_render_refuses_a_folder_that_already_holds_files(tmp_path):
    """kubectl apply -f DIR would apply stale manifests from an earlier render too."""
    out = tmp_path / "manifests"
    out.mkdir()
    (out / "00-job-old.yaml").write_text("kind: Job\n")
    run = invoke(
        "cluster.render",
        "--image",
        "127.0.0.1:5000/p/q@sha256:" + "a" * 64,
        "--job",
        "examples/train.yaml",
        "--out",
        str(out),
    )
    assert run.returncode == 2 and "is not an empty folder" in run.stderr
    assert [p.name for p in out.iterdir()] == ["00-job-old.yaml"]


def test_a_half_set_of_env_credentials_is_refused(tmp_path):
    run = invoke(
        "lock",
        "--variant",
        "cpu",
        "--dry-run",
        PADDLECD_REGISTRY_PASSWORD="hunter2-secret",
        PADDLECD_STATE_DIR=str(tmp_path),
    )
    assert run.returncode == 2 and "only one of PADDLECD_REGISTRY_USERNAME" in run.stderr
    assert "hunter2-secret" not in run.stdout + run.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["verify", "--image", ""], "--image is empty"),
        (["verify", "--image=   "], "--image is empty"),
        (["evidence.keygen", "--out", ""], "--out is empty"),
        (["upload", "--model-dir", "", "--name", "m", "--version", "1.0.0"],
         "--model-dir is empty"),
        (["promote", "--variant", "cpu", "--version", "1.2.3 ", "--digest", "sha256:" + "a" * 64,
          "--dry-run"], "--version '1.2.3 ' has white space around it"),
        # trial 9: a leading space in a reference was "has no digest"
        (["upload", "--model-dir", "/tmp", "--name", "m", "--version", "1.0.0", "--image",
          " 127.0.0.1:5000/paddlecd/release@sha256:" + "a" * 64],
         "--image ' 127.0.0.1:5000/paddlecd/release@sha256:aaaa"),
        (["release.list", "--variant", "cpu\t"], "--variant 'cpu\\t' has white space around it"),
        # trial 13: recorded in the ledger and printed by release.show, 133 KB, two lines
        (["promote", "--variant", "cpu", "--version", "1.0.0", "--accept-regression", "a\nb",
          "--dry-run"], "--accept-regression holds the control character '\\n'"),
        (["promote", "--variant", "cpu", "--version", "1.0.0", "--accept-regression", "x" * 501,
          "--dry-run"], "--accept-regression is 501 characters long (at most 500)"),
        (["promote", "--variant", "cpu", "--version", "1.0.0", "--force", "--reason",
          "GPU down\x1b[31m", "--dry-run"], "--reason holds the control character '\\x1b'"),
    ],
)
def test_an_empty_or_padded_flag_is_refused_by_name_and_nothing_is_written(tmp_path, args,
                                                                             message):
    """A trial: verify --image '' verified the variant's candidate; keygen --out '' wrote the
    private key into the project root; --version '1.2.3 ' was trimmed and promoted."""
    run = invoke(*args, PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"error: {message}" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "state").exists()
    if message.endswith(" is empty"):  # trial 19: "leave the flag out for its default" (--out)
        assert "hint: give it a value (the task's --help says what leaving it out does)" \
            in run.stderr


def test_upload_refuses_a_paddle_version_that_is_not_one(tmp_path):
    out, _ = _export_leaking(tmp_path)
    run = invoke("upload", "--model-dir", str(out), "--name", "demo", "--version", "1.0.0",
                 "--paddle-version", "x; rm -rf", "--to", f"file://{tmp_path / 'store'}",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--paddle-version 'x; rm -rf' is not a Paddle version" in run.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("host, sends_pair", [("127.0.0.1:5000", True), ("other.example", False)])
def test_local_deploy_pulls_with_the_credentials_verify_uses(tmp_path, monkeypatch, host,
                                                             sends_pair):
    """A trial: local deploy never passed PADDLECD_REGISTRY_USERNAME/PASSWORD when it pulled
    (docker-py pulled on container start, without them: "no basic auth credentials"). Every pull
    takes registry.auth.engine_credentials: the pair for the configured registries only. No
    engine here: the pull and the containers are recorded, not run."""
    from paddlecd import engine
    from paddlecd.cluster import local
    from paddlecd.deployment import stage as deploy
    from paddlecd.registry.auth import Credentials

    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "s3cret")
    pulled = []
    monkeypatch.setattr(engine, "ensure_local", lambda ref, credentials=None: pulled.append(
        (ref, credentials)))
    monkeypatch.setattr(local, "run", lambda *a, **k: None)
    monkeypatch.setattr(deploy, "_check_export", lambda *a, **k: None)
    s = config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})
    image = f"{host}/p/q@sha256:" + "a" * 64
    job = (ROOT / "examples/train.yaml").read_text().replace(
        "  path: .\n", f"  path: {ROOT / 'examples'}\n").replace(
        "  path: ../.paddlecd/train-output", f"  path: {tmp_path / 'out'}")
    (tmp_path / "train.yaml").write_text(job)
    p = deploy.plan(s, job=str(tmp_path / "train.yaml"), image=image, cluster="local")
    deploy.run(s, p, on_event=lambda m: None, on_line=lambda m: None)
    assert pulled == [(image, Credentials("ci", "s3cret") if sends_pair else None)]


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--batch", "abc", "--batch must be a whole number from 2 to 4096, got 'abc'"),
        ("--batch", "0", "--batch must be a whole number from 2 to 4096, got '0'"),
        ("--batch", "99999999999", "--batch must be a whole number from 2 to 4096"),
        ("--rtol", "abc", "--rtol must be a number >= 0, got 'abc'"),
        ("--rtol", "-1", "--rtol must be a number >= 0, got '-1'"),
        ("--atol", "1e-3x", "--atol must be a number >= 0, got '1e-3x'"),
        ("--atol", "nan", "--atol must be a number >= 0, got 'nan'"),
        ("--rtol", "1_0", "--rtol must be a number >= 0, got '1_0'"),  # float() reads 10
        ("--batch", " 3", "--batch ' 3' has white space around it"),
        ("--onnx-opset", "99", "--onnx-opset must be a whole number from 7 to 19, got '99'"),
        # trial 7: past int()'s 4300 digits, a whole number was "not a whole number"
        ("--batch", "1" * 5000, "--batch 111111111111… (5000 digits) is too large"),
    ],
)
def test_check_numbers_are_refused_by_flag_name(tmp_path, flag, value, message):
    """A trial: --batch abc, --rtol abc and --atol=1e-3x ended in tracebacks from argument
    parsing; --batch 0 and --rtol -1 were refused without naming the flag."""
    run = invoke("artifacts.check", str(tmp_path), "--image", "r@sha256:" + "a" * 64,
                 f"{flag}={value}", PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2 and f"error: {message}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_check_of_a_local_folder_refuses_store(tmp_path):
    """Trial 7: ``artifacts.check --model <folder> --store URL`` checked the folder and dropped
    --store without a word."""
    (tmp_path / "m").mkdir()
    run = invoke("artifacts.check", "--model", str(tmp_path / "m"), "--store",
                 f"file://{tmp_path / 's'}", "--image", "1.0.0-cpu",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"), PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 2 and "is a folder on this machine, not a model of a store" in \
        run.stderr, run.stderr


def test_check_of_a_model_url_refuses_a_second_store(tmp_path):
    """Trial 11: ``artifacts.check --model file:///a/m/1.0.2 --store file:///b`` looked in the
    --store and said "no model at file:///b/m/1.0.2/", the store in --model dropped unsaid."""
    run = invoke("artifacts.check", "--model", f"file://{tmp_path / 'a'}/m/1.0.2", "--store",
                 f"file://{tmp_path / 'b'}", "--image", "1.0.0-cpu",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"), PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 2 and "each name a store" in run.stderr, run.stderr


def test_check_help_lists_every_option_by_its_name():
    run = invoke("artifacts.check", "--help")
    options = run.stdout.split("Options:", 1)[1]
    assert "--onnx-rtol=STRING" in options and "--," not in options, options


def test_keygen_prints_the_id_every_command_shows(tmp_path):
    """A trial (issue 21): one key was named three ways (keygen not at all, evidence.show by 16
    characters, promote's plan by 12, upload by model-signing's hex hint). One form everywhere:
    the whole fingerprint, printed by keygen."""
    from paddlecd.artifacts import signature as sig

    run = invoke("evidence.keygen", "--out", str(tmp_path / "k"),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 0, run.stderr
    private, public = tmp_path / "k" / keys.PRIVATE_NAME, tmp_path / "k" / keys.PUBLIC_NAME
    kid = keys.key_id(public)
    assert kid.startswith("SHA256:") and len(kid) == 50
    assert f"key id:      {kid} (" in run.stdout
    assert sig.ModelSigner(private.read_bytes(), str(private)).keyid == kid
    assert keys.shown(kid) == kid and keys.shown("x" * 1000) == "x" * 64 + "…"


def test_release_compare_parses_as_its_help_says(tmp_path):
    """A re-trial: ``release.compare --history cpu`` (the guide's command) said "--a is empty",
    and ``release.compare 1.0.0-cpu 1.1.0-cpu`` was Invoke's "No idea what '1.0.0-cpu' is!":
    Invoke has no optional positional arguments. Here the history mode reaches the registry."""
    state = str(tmp_path / "state")
    run = invoke("release.compare", "--history", "cpu", PADDLECD_STATE_DIR=state,
                 PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 5 and "127.0.0.1:9" in run.stderr, run.stderr
    both = invoke("release.compare", "-a", "1.0.0-cpu", "--history", "cpu",
                  PADDLECD_STATE_DIR=state)
    assert both.returncode == 2 and "not both" in both.stderr, both.stderr


def test_download_into_a_system_folder_is_named(tmp_path):
    """A re-trial: ``--dest /proc/x`` failed on its temp folder (``/proc/.x.XXXX``), unnamed."""
    run = invoke("artifacts.download", "--url", "m/1.0.0", "--dest", "/proc/t21x",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stderr
    assert "error: --dest /proc/t21x: /proc/t21x is inside the system folder /proc" in run.stderr
    assert "e.g. ./out" in run.stderr  # a folder, not ./policy.yaml
    # trial 15: --dest /root/.ssh/m wrote the model's 6 files into root's SSH folder
    run = invoke("artifacts.download", "--url", "m/1.0.0", "--dest", "/root/.ssh/t15m",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stderr
    assert "/root/.ssh/t15m is inside the credential folder /root/.ssh" in run.stderr
    assert not Path("/root/.ssh/t15m").exists()


def test_verify_and_compare_outputs_in_a_system_folder_are_refused(tmp_path):
    """A third trial: ``verify --out /etc/v`` ran the suite and left a world-writable /etc/v with
    junit, evidence and rank logs; ``release.compare --history cpu --out /etc/x.png`` was judged
    only by the ledger. Both are refused by name before anything runs or is read."""
    state = str(tmp_path / "state")
    run = invoke("verify", "--variant", "cpu", "--out", "/etc/t21v", PADDLECD_STATE_DIR=state,
                 PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 2, run.stderr
    assert "error: --out /etc/t21v: /etc/t21v is inside the system folder /etc" in run.stderr
    assert not Path("/etc/t21v").exists()
    chart = invoke("release.compare", "--history", "cpu", "--out", "/usr/t21x.png",
                   PADDLECD_STATE_DIR=state, PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert chart.returncode == 2, chart.stderr
    assert "error: --out /usr/t21x.png: /usr is inside the system folder /usr" in chart.stderr


@pytest.mark.parametrize(("out", "why"), [("h.txt", "does not end in .png"),
                                        ("h", "does not end in .png"),
                                        (".", "is a folder, not a file")])
def test_compare_out_is_a_png_path_checked_before_the_ledger(tmp_path, out, why):
    """Trial 7: ``--out h.txt`` was matplotlib's traceback; ``--out <folder>`` said "wrote
    <folder>" and wrote <folder>.png beside it; ``--out h`` wrote h.png and said h. No registry
    runs on 127.0.0.1:9: the refusal comes first."""
    run = invoke("release.compare", "--history", "cpu", "--out", str(tmp_path / out),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"), PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 2 and f"{why}\nhint: " in run.stderr, run.stderr
    assert ".png" in run.stderr.split("hint: ")[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_variant_given_to_a_later_task_applies_to_doctor_and_lock_too(tmp_path):
    """Trial 7: ``invoke lock --dry-run smoke.checks --variant cpu`` locked every variant (and
    failed on Docker Hub for cu118), ``invoke doctor release.list --variant cpu`` checked the
    GPU variants too; the README says a --variant given once applies to every task on the
    command line (lock and doctor share the one rule: common.variants_given)."""
    run = invoke("doctor", "release.list", "--variant", "cpu", PADDLECD_STATE_DIR=str(tmp_path),
                 PADDLECD_REGISTRY_URL="127.0.0.1:9", DOCKER_HOST="unix:///nonexistent.sock")
    assert "gpu driver      no GPU on this host; only CPU variants in use" in run.stdout, (
        run.stdout + run.stderr)


def test_an_output_never_replaces_a_file_it_did_not_write(tmp_path):
    """Trial 7: ``release.policy --out <the private signing key>`` replaced the key with the
    policy (exit 0); ``release.compare --out X.png`` replaced X.md too, never named. A file the
    command wrote before (a policy, a PNG and its chart Markdown) is replaced as before."""
    key = tmp_path / "paddlecd-signing.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n")
    state = str(tmp_path / "state")
    keys.keygen(tmp_path / "state" / "keys")  # the embedded default trusts the state's pair
    run = invoke("release.policy", "--out", str(key), PADDLECD_STATE_DIR=state)
    assert run.returncode == 2 and f"--out {key} exists and is no ClusterPolicy file" in run.stderr
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    policy = tmp_path / "policy.yaml"
    for _ in range(2):  # written, then replaced: the command's own output
        assert invoke("release.policy", "--out", str(policy), PADDLECD_STATE_DIR=state
                      ).returncode == 0
    (tmp_path / "h.md").write_text("my notes\n")
    chart = invoke("release.compare", "--history", "cpu", "--out", str(tmp_path / "h.png"),
                   PADDLECD_STATE_DIR=state, PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert chart.returncode == 2 and "(its Markdown twin)" in chart.stderr, chart.stderr
    assert (tmp_path / "h.md").read_text() == "my notes\n"


def test_verify_models_refuses_a_bad_release_models_before_the_suite_runs(tmp_path):
    """A third trial: ``PADDLECD_RELEASE_MODELS=bad@@1 verify --models`` ran the whole suite in
    the image, then failed with "invalid model version '@1'" naming no setting. The setting is
    read before anything runs (here the registry is not even asked) and named."""
    for models, bad in (("bad@@1", "'@1'"), ("Bad@1.0.0", "'Bad'"), ("m@1.0", "'1.0'")):
        run = invoke("verify", "--variant", "cpu", "--models", PADDLECD_RELEASE_MODELS=models,
                     PADDLECD_STATE_DIR=str(tmp_path / "state"),
                     PADDLECD_REGISTRY_URL="127.0.0.1:9")
        assert run.returncode == 2, run.stderr
        assert ("error: setting 'release.models' (PADDLECD_RELEASE_MODELS): invalid model"
                in run.stderr)
        assert bad in run.stderr and "127.0.0.1:9" not in run.stderr


def test_verify_models_refuses_a_model_not_in_the_store_before_the_suite_runs(tmp_path):
    """Trial 7: ``PADDLECD_RELEASE_MODELS=nosuch@1.0.0 verify --models`` ran the whole smoke
    suite (and rewrote .paddlecd/verify/…) before naming the missing model. It is looked up in
    the store first; no registry runs on 127.0.0.1:9, and none is asked."""
    (tmp_path / "store").mkdir()
    for models in ("nosuch@1.0.0", "nosuch"):
        run = invoke("verify", "--variant", "cpu", "--models", PADDLECD_RELEASE_MODELS=models,
                     PADDLECD_STATE_DIR=str(tmp_path / "state"),
                     PADDLECD_STORAGE_URL=f"file://{tmp_path / 'store'}",
                     PADDLECD_REGISTRY_URL="127.0.0.1:9")
        assert run.returncode == 8, run.stderr
        assert "nosuch" in run.stderr and "127.0.0.1:9" not in run.stderr
    assert not (tmp_path / "state" / "verify").exists()


def test_promote_refuses_a_bad_release_models_as_verify_does(tmp_path):
    """Trial 4: promote's gate said "lin@latest: not checked in this image (run: invoke verify
    --models)", and that verify refused the setting; ``a,,b`` was taken by both."""
    for models, why in (("lin@latest", "invalid model version 'latest' of lin"),
                        ("lin@1.0.0,,lin", "has an empty entry")):
        run = invoke("promote", "--variant", "cpu", "--version", "1.0.1", "--dry-run",
                     PADDLECD_RELEASE_MODELS=models, PADDLECD_STATE_DIR=str(tmp_path / "s"),
                     PADDLECD_REGISTRY_URL="127.0.0.1:9")
        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith("error: setting 'release.models' (PADDLECD_RELEASE_MODELS)")
        assert why in run.stderr and "127.0.0.1:9" not in run.stderr


def test_every_task_helpline_is_a_whole_sentence():
    """``invoke --list`` shows only the docstring's first line (invoke.util.helpline): a sentence
    that runs onto the second line is listed cut off ("... side by")."""
    from invoke.util import helpline

    from paddlecd.cli import ns

    def walk(coll, prefix=""):
        for name, task in coll.tasks.items():
            yield prefix + name, task
        for name, sub in coll.collections.items():
            yield from walk(sub, f"{prefix}{name}.")

    cut = [name for name, task in walk(ns)
           if not (helpline(task) or "").rstrip().endswith((".", ")"))]
    assert cut == []


def test_download_takes_the_name_at_version_form_as_show_and_check(tmp_path):
    """Trial 9: ``artifacts.download file:///s/big@1.0.0 DEST`` said "store URL 'file:///s' is
    a top-level folder"; the @ form is read as artifacts.show and check read it."""
    store = tmp_path / "store"
    run = invoke("artifacts.download", f"file://{store}/big@1.0.0", str(tmp_path / "d"),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode != 0 and "top-level folder" not in run.stderr, run.stderr
    assert "no trusted keys configured" in run.stderr  # the form was read: the keys come next
    run = invoke("artifacts.download", f"file://{store}/big", str(tmp_path / "d"),
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2 and f"error: 'file://{store}/big' names no version" in run.stderr


def test_check_of_a_missing_folder_names_the_folder(tmp_path):
    """Trial 10: ``artifacts.check --model /tmp/nonexist`` said "does not end in <name>", as if
    it named a stored model."""
    run = invoke("artifacts.check", "--model", str(tmp_path / "nonexist"), "--image", "1.0.0-cpu",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2
    assert f"error: model folder {tmp_path / 'nonexist'} does not exist" in run.stderr


@pytest.mark.parametrize("task", [
    ["promote", "--variant", "cpu", "--version", "1.0.0"],
    ["release.rollback", "--variant", "cpu", "--to", "1.0.0"],
    ["release.repair", "--variant", "cpu"],
    ["release.prune", "--variant", "cpu"],
])
def test_dry_run_and_yes_together_are_refused_before_any_registry(tmp_path, task):
    """Trial 13: ``--dry-run --yes`` printed the plan and "nothing written", the --yes dropped
    unsaid. No registry runs on 127.0.0.1:9: the refusal comes first."""
    run = invoke(*task, "--dry-run", "--yes", PADDLECD_STATE_DIR=str(tmp_path / "state"),
                 PADDLECD_REGISTRY_URL="127.0.0.1:9")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "error: --dry-run and --yes contradict each other" in run.stderr


def test_a_variant_given_twice_is_refused(tmp_path):
    """Trial 14: ``pipeline.run pr --variant cpu --variant cpu`` planned "cpu, cpu", and a real
    run wrote a summary whose --resume it then refused (non-unique variants)."""
    run = invoke("pipeline.run", "pr", "--variant", "cpu", "--variant", "cpu", "--dry-run",
                 PADDLECD_STATE_DIR=str(tmp_path / "state"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "error: --variant cpu is given twice" in run.stderr
    assert not (tmp_path / "state" / "pipelines").exists()


@pytest.mark.parametrize("args", [("smoke.checks",), ("--list",)])
def test_a_closed_stdout_ends_quietly_with_141(args):
    """Trial 16: ``invoke release.show 0.1.1 | head -1`` said "error: Broken pipe", hint "check
    the path", exit 2; Invoke's own ``--list`` into a closed pipe ended in a traceback. Both end
    as a shell tool killed by SIGPIPE: 141, nothing on stderr."""
    import os
    import subprocess

    from support.cli import INVOKE

    read, write = os.pipe()
    os.close(read)  # the reader left before the first line: every write is EPIPE
    try:
        run = subprocess.run([INVOKE, *args], cwd=ROOT, stdout=write, stderr=subprocess.PIPE,
                             text=True, timeout=120)
    finally:
        os.close(write)
    assert (run.returncode, run.stderr) == (141, ""), run.stderr


def test_push_signs_the_provenance_of_the_build_it_pushed(tmp_path, monkeypatch):
    """Push read the build record three times: a build finishing during the upload rewrote it,
    and the provenance of that other image was signed for the pushed digest. The record is read
    once (the engine and registry are stood in for: what is checked is which record is signed)."""
    from paddlecd.image import provenance

    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    (tmp_path / "builds").mkdir()
    record = tmp_path / "builds" / "cpu.json"
    tag = f"{s.candidate_repo}:cpu-aaaaaaa"
    record.write_text(json.dumps({"tag": tag, "base": "b@sha256:1", "image_id": "sha256:a"}))
    monkeypatch.setattr(publish.engine, "image_exists", lambda t: True)
    monkeypatch.setattr(publish.engine, "image_id", lambda t: "sha256:a")
    monkeypatch.setattr(publish.registry_auth, "find_credentials", lambda host: None)
    monkeypatch.setattr(keys, "configured", lambda settings: True)
    monkeypatch.setattr(keys, "signer", lambda settings: None)

    def pushed_while_a_build_ends(settings, pushed_tag, on_progress=None):
        record.write_text(json.dumps({"tag": f"{s.candidate_repo}:cpu-bbbbbbb",
                                      "base": "b@sha256:2", "image_id": "sha256:b"}))
        return "sha256:" + "c" * 64

    signed = []
    monkeypatch.setattr(publish, "push_reference", pushed_while_a_build_ends)
    monkeypatch.setattr(provenance, "attach",
                        lambda settings, build, **kw: signed.append(build) or "attached")
    pushed = publish.push(s, "cpu")
    assert pushed.tag == tag and [b["image_id"] for b in signed] == ["sha256:a"]


def test_a_lock_that_fails_on_one_base_says_nothing_was_written(tmp_path):
    """Trial 19: ``invoke lock`` printed the cpu base as resolved, then failed on cu118 (no
    Docker Hub here), without a word that nothing, cpu neither, had been written."""
    (tmp_path / "v.yaml").write_text(
        "variants:\n  a: {device: cpu, base: '127.0.0.1:9/p/paddle:3.0.0', paddle: '3.0.0'}\n")
    run = invoke("lock", PADDLECD_STATE_DIR=str(tmp_path / "state"),
                 PADDLECD_VARIANTS_FILE=str(tmp_path / "v.yaml"),
                 PADDLECD_LOCK_FILE=str(tmp_path / "lock.yaml"))
    assert run.returncode == 3, run.stderr
    assert "nothing was written (a lock is all or nothing): lock what resolves with --variant" \
        in run.stderr
    assert not (tmp_path / "lock.yaml").exists()
