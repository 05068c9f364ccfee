"""The main job end to end on the real engine and a real distribution registry (htpasswd + TLS):
`invoke build push verify --variant cpu` as a user runs it, and the evidence it leaves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import requests

from paddlecd import engine
from paddlecd.image import candidate, lock
from paddlecd.registry.client import client_for
from paddlecd.verify import evidence

from support import ROOT, UNIQUE, cli_env, invoke, project_settings
from support.cli import invoke_on_terminal, rendered

# One worker runs the module: its tests read one `build push verify` run (pipeline_run, ~17 s),
# which each worker would make again for the tests it got.
pytestmark = pytest.mark.xdist_group("build_push_verify")
STAGES = ("build", "push", "verify")
ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07)")
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


@pytest.fixture(scope="module")
def pipeline_run(registry, main_state, paddle_base):
    """`invoke build push verify --variant cpu`, run once for this module, as a GitHub Actions
    step runs it (no terminal, ``CI=true``, ``GITHUB_ACTIONS=true``)."""
    env = cli_env(registry, main_state, CI="true", GITHUB_ACTIONS="true")
    env.pop("GITHUB_STEP_SUMMARY", None)
    run = invoke("build", "push", "verify", "--variant", "cpu", env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def test_ci_log_is_plain_lines_with_each_stage_folded(pipeline_run):
    """In CI: no control codes; each stage's tool output inside ::group::/::endgroup::, its
    result line after the group (visible folded), and the summary table at the end."""
    err = pipeline_run.stderr
    assert "\x1b" not in err and "\x1b" not in pipeline_run.stdout
    lines = err.splitlines()
    for name in STAGES:
        start = lines.index(f"::group::{name} cpu")
        end = lines.index("::endgroup::", start)
        assert lines[end + 1].startswith(f"✔ {name} cpu "), lines[end:end + 2]
        assert end - start > 1, f"{name}: no tool output inside its group"
    verify_group = lines[lines.index("::group::verify cpu"):]
    verify_group = verify_group[:verify_group.index("::endgroup::")]
    assert any(re.search(r"\d+ passed, \d+ skipped", x) for x in verify_group)  # pytest's own
    header = next(i for i, x in enumerate(lines) if x.split() == ["stage", "variant", "result",
                                                                   "key", "figure", "time"])
    rows = [x.split()[:3] for x in lines[header + 1:header + 4]]
    assert rows == [[name, "cpu", "✔"] for name in STAGES]
    assert "{'" not in err + pipeline_run.stdout


def test_build_push_verify_records_passing_evidence(pipeline_run, registry, main_state):
    settings = project_settings(main_state, registry=registry)
    cand = candidate.load_candidate(settings, "cpu")
    assert cand and cand.reference == f"{registry.host}/paddlecd/paddle@{cand.digest}"
    record = evidence.load(settings, cand.digest)
    assert record.passed is True and record.variant == "cpu"
    names = {c.name for c in record.checks}
    assert {
        "environment/test_import_paddle",
        "allreduce/test_allreduce_exact_sums",
        "convergence/test_data_parallel_matches_single_process",
        "export/test_jit_save_load_and_inference",
    } <= names
    allreduce = next(c for c in record.checks if c.name == "allreduce/test_allreduce_exact_sums")
    assert allreduce.metrics["backend"] == "gloo" and allreduce.metrics["world_size"] == 2
    assert allreduce.metrics["wrong_elements"] == 0
    assert Path(record.junit).exists()
    # the figures promotion compares (release/gates.py): each with unit, median and hardware
    figures = {f["name"]: f for f in record.figures}
    assert {"train.throughput", "train.step_time", "allreduce.latency.4B", "export.save_time",
            "export.latency.batch1", "export.latency.batch64"} <= set(figures)
    assert figures["train.throughput"]["unit"] == "samples/s"
    assert figures["train.step_time"]["samples"] == 380 and figures["train.step_time"]["value"] > 0
    assert record.hardware and record.hardware.endswith("cores)")
    assert all("hardware" not in f for f in record.figures)  # named once, for all of them
    skipped = sum(c.skipped for c in record.checks)  # the GPU-only checks, on this CPU image
    assert f"verified {cand.reference}: {len(record.checks) - skipped} passed" + (
        f", {skipped} skipped" if skipped else "") in pipeline_run.stdout


def test_pushed_digest_is_what_the_registry_serves(pipeline_run, registry, main_state):
    settings = project_settings(main_state, registry=registry)
    cand = candidate.load_candidate(settings, "cpu")
    r = requests.head(
        f"https://{registry.host}/v2/paddlecd/paddle/manifests/{cand.tag}",
        auth=next(iter(registry.users.items())),
        verify=str(registry.ca_file),
        timeout=10,
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )
    assert r.headers["Docker-Content-Digest"] == cand.digest
    assert cand.tag.startswith("cpu-") and cand.tag != "latest"


def test_image_labels_and_non_root_user(pipeline_run, registry, main_state):
    settings = project_settings(main_state, registry=registry)
    cand = candidate.load_candidate(settings, "cpu")
    labels = engine.image_labels(cand.reference)
    entry = lock.read(settings)["cpu"]
    assert labels["org.opencontainers.image.base.digest"] == entry.digest
    assert labels["org.opencontainers.image.base.name"] == entry.base
    assert len(labels["org.opencontainers.image.revision"]) == 40
    assert labels["io.paddlecd.paddle.version"] == "3.0.0" and labels["io.paddlecd.device"] == "cpu"
    assert engine.image_user(cand.reference) == "paddle"
    # a URL others can fetch from, never a folder of this machine (a fresh clone's origin is one)
    from paddlecd import git

    assert labels["org.opencontainers.image.source"] == (git.origin_url(ROOT) or "unknown")
    assert not labels["org.opencontainers.image.source"].startswith(("/", "file:"))


def test_push_attaches_the_signed_slsa_provenance_of_the_build(pipeline_run, registry,
                                                                main_state, tmp_path,
                                                                monkeypatch):
    """What push attached is about the pushed digest and says how it was built: this checkout's
    Dockerfile and revision, the locked base, the builder; no secret; sigstore-js verifies it."""
    import hashlib

    from paddlecd import git
    from paddlecd.image import provenance
    from paddlecd.registry import referrers
    from paddlecd.registry.client import client_for
    from paddlecd.signing import keys

    from support import sigstore_js
    from support.cli import signing_env

    settings = project_settings(main_state, registry=registry,
                                **{"release.trusted_keys":
                                   signing_env()["PADDLECD_RELEASE_TRUSTED_KEYS"]})
    cand = candidate.load_candidate(settings, "cpu")
    assert f"provenance: {registry.host}/paddlecd/paddle@sha256:" in pipeline_run.stdout
    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))  # the user's login
    client = client_for(settings)
    found = provenance.find(client, "paddlecd/paddle", cand.digest, keys.trusted(settings))
    assert found and all(p.problem is None for p in found)
    predicate = found[-1].predicate
    build = predicate["buildDefinition"]
    deps = {d.get("name", "source"): d for d in build["resolvedDependencies"]}
    dockerfile = hashlib.sha256((ROOT / "images" / "Dockerfile").read_bytes()).hexdigest()
    assert deps["Dockerfile"]["digest"] == {"sha256": dockerfile}
    assert f"sha256:{deps['base']['digest']['sha256']}" == lock.read(settings)["cpu"].digest
    revision = git.revision(ROOT)
    assert deps["source"]["digest"] == {"gitCommit": revision.full}
    assert deps["source"]["annotations"]["dirty"] is revision.short.endswith("-dirty")
    assert build["externalParameters"]["buildArgs"]["BASE"].endswith(deps["base"]["digest"]
                                                                      ["sha256"])
    run = predicate["runDetails"]
    described = run["builder"]["version"]["builder"]  # engine.pick_builder's description
    assert "buildx (BuildKit)" in described or "with DOCKER_BUILDKIT=1" in described
    assert run["metadata"]["startedOn"] <= run["metadata"]["finishedOn"]
    text = json.dumps(predicate)
    assert all(p not in text for p in registry.users.values()) and "BEGIN CERT" not in text
    layer = client.get_manifest("paddlecd/paddle", found[-1].location.rsplit("@", 1)[1]).json()
    raw = referrers.read_blob(client, "paddlecd/paddle", layer["layers"][0]["digest"])
    answer = sigstore_js.verify(raw, hint=keys.trusted(settings)[0].keyid,
                                public_key=Path(settings.release.trusted_keys),
                                digest=cand.digest, predicate_type=provenance.PREDICATE_TYPE,
                                tmp=tmp_path)
    assert answer["ok"], answer


def test_no_secret_in_layers_or_labels(pipeline_run, registry, main_state):
    """The CA bundle and index URL are BuildKit secrets: nothing of them is in the image
    history/labels."""
    settings = project_settings(main_state, registry=registry)
    cand = candidate.load_candidate(settings, "cpu")
    out = subprocess.run(
        ["/usr/bin/docker", "history", "--no-trunc", cand.reference], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert "BEGIN CERTIFICATE" not in out.stdout and all(
        p not in out.stdout for p in registry.users.values()
    )
    labels = json.dumps(engine.image_labels(cand.reference))
    assert all(p not in labels for p in registry.users.values())
    probe = subprocess.run(
        [
            "/usr/bin/docker",
            "run",
            "--rm",
            cand.reference,
            "sh",
            "-c",
            "ls /run/secrets 2>/dev/null | wc -l",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "0"


def test_rerun_on_a_terminal_is_cached_and_shows_the_live_view(pipeline_run, registry,
                                                               main_state, monkeypatch):
    """`build push verify` again, on a 100-column terminal. A re-run rebuilds from cache: the same
    layers (nothing new uploaded) and, for an unchanged git revision, the very same digest (labels
    use the commit time, not the wall clock). A person sees a spinner per stage, the running
    tool's lines under it, one result line per stage and a summary table, no Python reprs and no
    line wider than the terminal; the stage's log file holds the tool's full output."""
    from paddlecd.registry import client as reg

    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    env = cli_env(registry, main_state)
    settings = project_settings(main_state, registry=registry)
    before = candidate.load_candidate(settings, "cpu")
    logs = set((main_state / "logs").glob("verify-cpu-*.log"))
    code, stdout, screen = invoke_on_terminal(*STAGES, "--variant", "cpu", env=env, columns=100)
    text = ANSI.sub("", screen.decode())
    assert code == 0, text[-3000:]
    after = candidate.load_candidate(settings, "cpu")
    client = reg.client_for(settings)
    layers = [
        [
            layer["digest"]
            for layer in client.get_manifest("paddlecd/paddle", c.digest).json()["layers"]
        ]
        for c in (before, after)
    ]
    assert layers[0] == layers[1]
    if before.tag == after.tag:  # HEAD unchanged between the two runs
        assert after.digest == before.digest
    _live_view(text, screen, stdout, after)
    (log,) = set((main_state / "logs").glob("verify-cpu-*.log")) - logs
    full = log.read_text()
    assert "junit.xml" in full and re.search(r"\d+ passed, \d+ skipped", full)


def _live_view(text: str, screen: bytes, stdout: str, cand) -> None:
    """What was drawn (the raw stream) and what stays on the terminal (pyte renders it)."""
    assert b"\x1b[" in screen and SPINNER & set(text), "no live view drawn"
    raw = re.split(r"\r\n|\r|\n", text)
    assert max(len(x) for x in raw) <= 100  # tool lines are cut to the terminal's width
    verify_at = text.index("✔ verify cpu ")
    under = text[text.index("✔ push cpu "):verify_at]
    assert re.search(r"\d+ passed, \d+ skipped", under), "no tool lines under the spinner"
    final = rendered(screen, columns=100)
    results = [x for x in final if x.startswith(("✔", "✘"))]
    assert [x.split()[:3] for x in results] == [["✔", name, "cpu"] for name in STAGES], final
    assert cand.digest[:19] in results[1] and "layers already there" in results[1]
    assert re.search(r"\d+ passed, \d+ skipped", results[2])
    header = next(i for i, x in enumerate(final) if x.startswith("stage "))
    assert "key figure" in final[header] and [x.split()[0] for x in final[header + 1:]] == [
        *STAGES]
    assert len(final) == 3 + 4, final  # the spinners and tool lines collapsed into their results
    assert not SPINNER & set("".join(final)) and "{'" not in text + stdout
    assert "\x1b" not in stdout and f"verified {cand.reference}" in stdout


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--variant", "cu126"], "is variant 'cpu', not 'cu126'"),
        (["--gpus-per-node", "2"], "--gpus-per-node 2: {ref} is not a GPU image"),
    ],
)
def test_flags_that_do_not_apply_to_the_image_are_refused(pipeline_run, registry, main_state,
                                                          tmp_path, flags, message):
    """A trial: --variant cu126 with a cpu --image, and --gpus-per-node on a CPU image, were
    ignored. The image is named by its tag: verify resolves it once and says to which digest."""
    settings = project_settings(main_state, registry=registry)
    cand = candidate.load_candidate(settings, "cpu")
    tagged = f"{registry.host}/paddlecd/paddle:{cand.tag.rsplit(':', 1)[-1]}"
    run = invoke("verify", "--image", tagged, *flags,
                 env=cli_env(registry, main_state, PADDLECD_STATE_DIR=str(tmp_path / "state")))
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"resolved {tagged} to {cand.reference}" in run.stderr
    assert message.format(ref=cand.reference) in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "state" / "evidence").exists()


# The slowed image's one change: every process of its Python (site imports a .pth file's "import"
# lines at start-up; Debian's own sitecustomize.py would shadow one of ours) wraps
# paddle.nn.functional.mse_loss with a 5 ms sleep once the package is imported (an import hook:
# importing paddle at start-up would cost every process of the image its ~2.5 s).
SLOW_MSE_LOSS = """
import importlib.abc, importlib.util, sys, time

class _Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "paddle.nn.functional":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            fast = module.mse_loss

            def mse_loss(*args, **kwargs):
                time.sleep(0.005)
                return fast(*args, **kwargs)

            module.mse_loss = mse_loss

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Slow())
"""


def test_upgrade_gate_refuses_a_slowed_image_and_accepts_it_with_a_reason(
        pipeline_run, registry, main_state, tmp_path, monkeypatch):
    """The verified cpu image is released (the baseline); an image built FROM it with one layer
    more, a ``.pth`` file in site-packages that makes ``paddle.nn.functional.mse_loss`` 5 ms slower
    (as a patched package would; nothing in paddlecd or the smoke suite knows of it: each training
    step takes ~6-10x as long here), is verified for real, and promote refuses it naming the figure
    (exit 7, nothing written); --accept-regression lets it through, recorded with the reason and
    who. The limit is the loose one a shared 2-core runner needs (scripts/demo.sh): only a real
    slowdown trips it."""
    from paddlecd.registry import auth
    from paddlecd.release import promote as release

    repository = f"release/gates-{UNIQUE}"
    env = cli_env(registry, main_state, CI="true", PADDLECD_RELEASE_REPOSITORY=repository,
                  PADDLECD_RELEASE_MAX_SLOWDOWN="2")
    settings = project_settings(main_state, registry=registry,
                                **{"release.repository": repository})
    baseline = candidate.load_candidate(settings, "cpu")
    first = invoke("promote", "--variant", "cpu", "--version", "1.0.0", "--digest",
                   baseline.digest, "--yes", "--json", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["comparison"]["status"] == "not compared"

    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    (tmp_path / "slow_mse_loss.py").write_text(SLOW_MSE_LOSS)
    (tmp_path / "slow_mse_loss.pth").write_text("import slow_mse_loss\n")
    (tmp_path / "Dockerfile").write_text(
        f"FROM {baseline.reference}\nUSER root\nCOPY slow_mse_loss.py slow_mse_loss.pth /tmp/\n"
        "RUN mv /tmp/slow_mse_loss.py /tmp/slow_mse_loss.pth \"$(python3 -c 'import site; "
        "print(site.getsitepackages()[0])')/\"\nUSER paddle\n")
    slow = f"{registry.host}/paddlecd/paddle:cpu-slow-{UNIQUE}"
    engine.api_build(context=tmp_path, dockerfile=tmp_path / "Dockerfile", tag=slow,
                     build_args={}, labels={}, secrets={})
    digest = engine.push(slow, credentials=auth.find_credentials(registry.host))
    verified = invoke("verify", "--variant", "cpu", "--image",
                      f"{registry.host}/paddlecd/paddle@{digest}", "--json", env=env)
    assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-3000:]

    records = len(release.history(settings))
    refused = invoke("promote", "--variant", "cpu", "--version", "1.0.1", "--digest", digest,
                     "--yes", env=env)
    assert refused.returncode == 7, refused.stderr[-3000:]
    cause = next(x for x in refused.stderr.splitlines() if x.startswith("error:"))
    for word in ("train.step_time", "slower than 1.0.0-cpu",
                 baseline.digest, digest, "cores)"):
        assert word in cause, (word, cause)
    assert "--accept-regression" in refused.stderr
    assert len(release.history(settings)) == records  # nothing written: no record, no tag
    assert release.find(settings, "1.0.0-cpu").digest == baseline.digest
    tags = client_for(settings).list_tags(repository)
    assert "1.0.1-cpu" not in tags and "latest-cpu" in tags

    accepted = invoke("promote", "--variant", "cpu", "--version", "1.0.1", "--digest", digest,
                      "--yes", "--json", "--accept-regression", "a slower mse_loss on purpose",
                      env=env)
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    gate = release.history(settings)[-1].gate
    assert (gate["status"], gate["reason"], gate["baseline"]) == (
        "accepted", "a slower mse_loss on purpose", "1.0.0-cpu")
    assert gate["who"] and "train.step_time" in {
        v["name"] for v in gate["verdicts"] if v["status"] == "regression"}
    shown = invoke("release.show", "1.0.1-cpu", env=env)
    assert "regression accepted by" in shown.stdout and "a slower mse_loss" in shown.stdout
