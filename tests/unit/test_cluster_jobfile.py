"""The job file: schema with "did you mean", impossible resources, mounts; every error is one line
naming the file and the key, with a hint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from paddlecd import files
from paddlecd.cluster import jobfile
from paddlecd.errors import ConfigError

from support import ROOT

BASE = {
    "name": "demo",
    "command": {"script": "train.py", "args": ["--steps", 10]},
    "code": {"path": ".", "mountPath": "/code"},
    "output": {"path": "out", "mountPath": "/output"},
    "resources": {"cpu": "1", "memory": "2Gi", "shm": "512Mi"},
}


def write(tmp_path: Path, **changes) -> Path:
    data = {**BASE, **changes}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_example_job_file_loads(project_root):
    spec = jobfile.load(project_root / "examples" / "train.yaml")
    assert spec.script == "/workspace/examples/train_linear.py" and spec.nodes == 2
    assert (
        spec.code and Path(str(spec.code.path)) == project_root / "examples" and spec.code.read_only
    )
    assert spec.model_path == "/output/model" and spec.checkpoint == "/output/checkpoints"
    jobfile.check(spec, gpu_variant=False, variant="cpu")


def test_defaults_and_relative_paths(tmp_path):
    spec = jobfile.load(write(tmp_path))
    assert spec.script == "/code/train.py" and spec.args == ("--steps", "10")
    assert spec.output.path == str(tmp_path / "out") and not spec.output.read_only
    assert (spec.backoff_limit, spec.active_deadline_seconds, spec.port, spec.run_as_user) == (
        0,
        86400,
        36543,
        1000,
    )
    assert (
        spec.with_overrides(nodes=3, gpus=2).nodes == 3
        and spec.with_overrides(gpus=2).resources.gpus == 2
    )


@pytest.mark.parametrize(
    "change, unknown, where, suggestion",
    [
        ({"resoures": {}}, "resoures", "(top level)", "resources"),
        ({"resources": {"gpu": 1}}, "gpu", "resources", "gpus"),
        (
            {"output": {"path": "o", "mountPath": "/o", "readonly": True}},
            "readonly",
            "output",
            "readOnly",
        ),
        ({"backofflimit": 2}, "backofflimit", "(top level)", "backoffLimit"),
    ],
)
def test_unknown_keys_get_a_did_you_mean(tmp_path, change, unknown, where, suggestion):
    with pytest.raises(ConfigError) as info:
        jobfile.load(write(tmp_path, **change))
    assert (
        f"unknown key '{unknown}' at {where}" in info.value.cause
        and str(tmp_path) in info.value.cause
    )
    assert info.value.hint == f"did you mean '{suggestion}'?"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"resources": {"memory": "4 GB"}}, "resources.memory"),
        ({"name": "Bad_Name"}, "name"),
        (
            {"output": {"path": "o", "claim": "c", "mountPath": "/o"}},
            "exactly one of 'path' or 'claim'",
        ),
        ({"command": {"script": "/t.py", "args": [{"a": 1}]}}, "command.args[0]"),
        ({"nodes": 0}, "nodes"),
        # a re-trial: past what Kubernetes (and a local timeout) takes, yet the dry run passed
        ({"activeDeadlineSeconds": 10**20}, "activeDeadlineSeconds"),
        ({"runAsUser": 2**40}, "runAsUser"),
    ],
)
def test_schema_violations_name_the_key(tmp_path, change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        jobfile.load(write(tmp_path, **change))


def test_gpus_on_a_cpu_variant_are_impossible_and_named_where_they_came_from(tmp_path):
    """Trial 19: ``--gpus-per-node 1`` over a file of ``gpus: 0`` named the job file."""
    spec = jobfile.load(write(tmp_path)).with_overrides(gpus=8)
    with pytest.raises(ConfigError) as e:
        jobfile.check(spec, gpu_variant=False, variant="cpu")
    assert e.value.cause == "--gpus-per-node 8: GPUs per node requested on the CPU variant 'cpu'"
    assert e.value.hint.startswith("drop --gpus-per-node")
    jobfile.check(spec, gpu_variant=True, variant="cu126")
    in_file = jobfile.load(write(tmp_path, resources={"gpus": 2})).with_overrides(nodes=2)
    with pytest.raises(ConfigError) as e:
        jobfile.check(in_file, gpu_variant=False, variant="cpu")
    assert e.value.cause == (f"{in_file.source}: 2 GPUs per node requested on the CPU variant "
                             "'cpu'") and e.value.hint.startswith("set resources.gpus to 0")


def test_shm_larger_than_memory_is_impossible(tmp_path):
    spec = jobfile.load(write(tmp_path, resources={"memory": "1Gi", "shm": "2Gi"}))
    with pytest.raises(ConfigError) as info:
        jobfile.check(spec, gpu_variant=False, variant="cpu")
    assert "resources.shm 2Gi is larger than resources.memory 1Gi" in info.value.cause
    assert "memory-backed" in info.value.hint


def test_checkpoints_must_land_on_a_writable_mount(tmp_path):
    spec = jobfile.load(write(tmp_path, checkpoint="/code/ckpt"))
    with pytest.raises(ConfigError, match="checkpoint /code/ckpt is not under a writable mount"):
        jobfile.check(spec, gpu_variant=False, variant="cpu")


def test_two_volumes_on_one_mount_path_are_refused(tmp_path):
    spec = jobfile.load(write(tmp_path, data={"claim": "d", "mountPath": "/output"}))
    with pytest.raises(ConfigError, match="share one mountPath"):
        jobfile.check(spec, gpu_variant=False, variant="cpu")


def test_a_relative_script_needs_a_code_folder(tmp_path):
    data = {k: v for k, v in BASE.items() if k != "code"}
    with pytest.raises(ConfigError, match="relative but no code folder"):
        jobfile.parse(data, source="x.yaml")


@pytest.mark.parametrize(
    "text, message", [("name: [", "not valid YAML"), ("- a\n- b\n", "expected a mapping")]
)
def test_malformed_files(tmp_path, text, message):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        jobfile.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="job file not found") as info:
        jobfile.load(tmp_path / "nope.yaml")
    assert "examples/train.yaml" in info.value.hint


# ------------------------------------------------------- complete before anything runs


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"nodes": 513}, "--nodes 513 is outside 1..512 (train.schema.json nodes)"),
        ({"nodes": 0}, "--nodes 0 is outside 1..512"),
        ({"gpus": 17}, "--gpus-per-node 17 is outside 0..16 (train.schema.json resources.gpus)"),
        ({"gpus": -1}, "--gpus-per-node -1 is outside 0..16"),
    ],
)
def test_flags_are_held_to_the_schema_bounds(tmp_path, overrides, message):
    spec = jobfile.load(write(tmp_path))
    with pytest.raises(ConfigError, match=re.escape(message)):
        spec.with_overrides(**overrides)
    assert spec.with_overrides(nodes=512, gpus=16).nodes == 512  # the bounds themselves are fine


@pytest.mark.parametrize(
    "resources, message",
    [
        ({"memory": "512m"}, "resources.memory 512m is not a whole number of bytes"),
        ({"shm": "100m"}, "resources.shm 100m is not a whole number of bytes"),
        ({"memory": "99999999T"}, "resources.memory 99999999T is not a whole number of bytes"),
        ({"memory": "1Mi", "shm": "1Mi"}, "resources.memory 1Mi is under the engine's 6Mi minimum"),
        ({"cpu": "0"}, "resources.cpu 0 is not between 1m and"),
        ({"cpu": "0.0005"}, "resources.cpu 0.0005 is not between 1m"),
        ({"cpu": "10000000000"}, "resources.cpu 10000000000 is not between"),
        ({"shm": "0"}, "resources.shm 0 is not a whole number"),
    ],
)
def test_quantities_the_engine_or_the_api_cannot_take_are_refused(tmp_path, resources, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        jobfile.load(write(tmp_path, resources={**BASE["resources"], **resources}))
    assert str(tmp_path) in info.value.cause and info.value.hint


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model": "../escape"}, "model ../escape leaves its mount"),
        ({"model": "a/../../b"}, "model a/../../b leaves its mount"),
        ({"checkpoint": "/output/../code"}, "checkpoint /output/../code leaves its mount"),
        (
            {"command": {"script": "../../bin/sh"}},
            "command.script /code/../../bin/sh leaves its mount",
        ),
        (
            {"output": {"path": "out", "mountPath": "/output/.."}},
            "output.mountPath /output/.. must",
        ),
        ({"data": {"claim": "d", "mountPath": "/"}}, "data.mountPath / must name a folder"),
        # trial 9: Docker wrote hostname, hosts, resolv.conf into the host folder mounted at /etc
        ({"output": {"path": "out", "mountPath": "/etc"}, "checkpoint": "/etc/ckpt"},
         "output.mountPath /etc is over the image's /etc folder"),
        ({"code": {"path": ".", "mountPath": "/usr"}, "command": {"script": "/usr/t.py"}},
         "code.mountPath /usr is over the image's /usr folder"),
        ({"data": {"claim": "d", "mountPath": "/usr/lib/x"}}, "over the image's /usr folder"),
        ({"data": {"claim": "d", "mountPath": "/tmp"}}, "data.mountPath /tmp is over the "
                                                        "image's /tmp folder"),
        # trial 9: both ranks trained, then the export wrote /output.json beside the mount
        ({"model": "."}, "model '.' names no file under output.mountPath"),
        ({"model": "exports/"}, "model 'exports/' names no file"),
        # trial 9: YAML .inf / 1e400 reached the process as the string "inf"
        ({"command": {"script": "t.py", "args": [1, float("inf")]}},
         "command.args[1] is .inf, not a finite number"),
        ({"env": {"NUM": float("nan")}}, "env.NUM is .nan, not a finite number"),
    ],
)
def test_paths_that_leave_their_mount_are_refused(tmp_path, change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        jobfile.load(write(tmp_path, **change))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"output": {"path": "/etc", "mountPath": "/output"}},
         "output.path resolves to /etc, which is inside the system folder /etc"),
        ({"output": {"path": "../../../../../../../../etc", "mountPath": "/output"}},
         "output.path resolves to /etc, which is inside the system folder /etc"),
        ({"output": {"path": "/usr/local/out", "mountPath": "/output"}},
         "output.path resolves to /usr/local/out, which is inside the system folder /usr"),
        ({"output": {"path": "/", "mountPath": "/output"}},
         "output.path resolves to /, which is the root folder"),
        ({"output": {"path": "/tmp", "mountPath": "/output"}},
         "output.path resolves to /tmp, which is a top-level folder"),
        ({"code": {"path": "/etc", "mountPath": "/code"}},
         "code.path resolves to /etc, which is inside the system folder /etc"),
        ({"data": {"path": "/proc/1", "mountPath": "/data"}},
         "data.path resolves to /proc/1, which is inside the system folder /proc"),
        # a trial: a read-only code.path: /root handed every rank root's .docker and .ssh
        ({"code": {"path": "/root", "mountPath": "/code"}},
         "code.path resolves to /root, which is a home folder as a whole"),
        ({"data": {"path": "/home/", "mountPath": "/data"}},
         "data.path resolves to /home, which is a home folder as a whole"),
        # trial 15: accepted at --dry-run (the model would have gone beside every program's state,
        # into the logs, the cron spool, root's SSH keys)
        ({"output": {"path": "../../../../../../../../var/lib", "mountPath": "/output"}},
         "output.path resolves to /var/lib, which is a folder of system state as a whole"),
        ({"output": {"path": "/var/log", "mountPath": "/output"}},
         "output.path resolves to /var/log, which is inside the system folder /var/log"),
        ({"output": {"path": "/var/spool/cron", "mountPath": "/output"}},
         "output.path resolves to /var/spool/cron, which is inside the system folder /var/spool"),
        ({"output": {"path": "/root/.ssh", "mountPath": "/output"}},
         "output.path resolves to /root/.ssh, which is inside the credential folder /root/.ssh"),
        ({"data": {"path": "/home/ada/.aws/x", "mountPath": "/data"}},
         "data.path resolves to /home/ada/.aws/x, which is inside the credential folder "
         "/home/ada/.aws"),
    ],
)
def test_host_folders_that_are_system_folders_are_refused(tmp_path, change, message):
    """What a trial found accepted at --dry-run: output at /etc, or ../../../../etc."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        jobfile.load(write(tmp_path, **change))


@pytest.mark.parametrize("path", ["/var/lib/jenkins/workspace/out", "/home/ada/models",
                                  "/root/.sshkeys-not/out", "/var/tmp/out"])
def test_a_program_s_own_folder_in_var_lib_and_a_home_s_subfolder_are_fine(tmp_path, path):
    """Jenkins workspaces are in /var/lib/jenkins: only /var/lib as a whole, and the system's own
    folders in it, are refused; in a home only its credential folders are."""
    spec = jobfile.load(write(tmp_path, output={"path": path, "mountPath": "/output"}))
    assert str(spec.volumes["output"].path) == path


def test_a_read_only_top_level_folder_and_a_deep_output_are_fine(tmp_path):
    spec = jobfile.load(write(tmp_path, data={"path": "/srv", "mountPath": "/data"},
                              output={"path": str(tmp_path / "runs" / "out"),
                                      "mountPath": "/output"}))
    assert (spec.data.path, spec.output.path) == ("/srv", str(tmp_path / "runs" / "out"))


def test_more_cpus_than_this_machine_has_is_refused_for_local_at_planning(tmp_path):
    # issue 21 trial: `cpu: "100000000"` passed `deploy --cluster local --dry-run` (Docker refuses
    # NanoCpus past the host's CPUs only at create time); the registry is a closed port, so the
    # refusal comes before any registry is asked
    from paddlecd import config
    from paddlecd.deployment import stage as deploy

    job = write(tmp_path, resources={**BASE["resources"], "cpu": "100000000"})
    with pytest.raises(ConfigError, match=r"resources.cpu 100000000 is more than this machine's"):
        deploy.check_host_cpus(jobfile.load(job), host_cpus=2)
    fits = tmp_path / "fits"
    fits.mkdir()
    deploy.check_host_cpus(jobfile.load(write(fits)), host_cpus=2)  # cpu 1 fits
    s = config.load({"state_dir": str(tmp_path / "state"), "registry.url": "127.0.0.1:9"},
                    root=Path(__file__).resolve().parents[2], environ={})
    with pytest.raises(ConfigError, match=r"resources.cpu 100000000 is more than"):
        deploy.plan(s, job=str(job), release="1.0.0-cpu", cluster="local")
    assert not (tmp_path / "state").exists()


def test_a_folder_inside_a_home_folder_is_fine(tmp_path):
    spec = jobfile.load(write(tmp_path, data={"path": "/home/alice/data", "mountPath": "/data"}))
    assert spec.data.path == "/home/alice/data"


@pytest.mark.parametrize("name", ["TRAIN_MODEL", "PADDLE_MASTER", "JOB_COMPLETION_INDEX", "HOME",
                                  "PADDLECD_MODEL"])
def test_a_job_env_naming_a_variable_paddlecd_sets_is_refused(tmp_path, name):
    """Trial 4: env TRAIN_MODEL sent the export outside the output mount ("left no model"), env
    PADDLE_MASTER pointed the ranks at another rendezvous than the launcher's --master."""
    with pytest.raises(ConfigError, match=f"env {name} is set by paddlecd itself"):
        jobfile.load(write(tmp_path, env={name: "x", "MY_FLAG": "1"}))
    assert dict(jobfile.load(write(tmp_path, env={"MY_FLAG": "1"})).env) == {"MY_FLAG": "1"}


def test_a_job_file_whose_aliases_expand_past_the_cap_is_refused(tmp_path):
    """Trial 4: 82 KB of job file (one 1000-character string, 20,000 aliases of it in
    command.args) printed 40 MB of manifests at --dry-run; 200,000 aliases took 110 s and 1.28 GB.
    The size cap holds for what the file stands for, and is reached in bounded time."""
    text = (ROOT / "examples" / "train.yaml").read_text()
    assert 'args: ["--steps", "300"]' in text
    bomb = text.replace('args: ["--steps", "300"]',
                        'args: [&s "%s", %s]' % ("x" * 1000, ", ".join(["*s"] * 20000)))
    (tmp_path / "train.yaml").write_text(bomb.replace("path: .\n", f"path: {ROOT}/examples\n", 1))
    with pytest.raises(ConfigError, match="expands to more than 1048576 bytes through its YAML "
                                          "aliases"):
        jobfile.load(tmp_path / "train.yaml")
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi"))  # 10^9 scalars written out
    (tmp_path / "laughs.yaml").write_text(laughs)
    with pytest.raises(ConfigError, match="expands to more than"):
        files.read_yaml(tmp_path / "laughs.yaml")


@pytest.mark.parametrize(("changes", "cause"), [
    ({"command": {"script": "train.py", "args": ["--steps", "3\x000"]}},
     "command.args[1] holds a NUL byte"),
    ({"env": {"MY_FLAG": "a\x00b"}}, "env MY_FLAG holds a NUL byte"),
    ({"command": {"script": "train.py", "args": ["x" * 1_000_000]}},
     "command.args[0] is 1000001 bytes, more than the 131072"),
    ({"env": {"BIG": "y" * 131_070}}, "env BIG is 131075 bytes"),
])
def test_an_argument_no_process_can_take_is_refused_without_quoting_it(tmp_path, changes, cause):
    """Trial 7: a NUL in command.args passed the dry run, and the real run made the job's network
    and containers before the engine said "invalid argument"; a 1 MB argument was printed whole
    in the plan and twice in the error (2 MB of stderr) before exec refused it."""
    with pytest.raises(ConfigError) as e:
        jobfile.load(write(tmp_path, **changes))
    assert cause in e.value.cause and len(e.value.cause) < 300
    assert jobfile.load(write(tmp_path, env={"OK": "y" * 1000})).env == (("OK", "y" * 1000),)


def test_a_model_no_file_system_takes_is_refused(tmp_path):
    """Trial 10: a 300-character ``model`` passed the dry run, trained, then failed to save."""
    with pytest.raises(ConfigError, match=r"names no file under output.mountPath \(a file name"):
        jobfile.load(write(tmp_path, model="m" * 300))


@pytest.mark.parametrize("change, where", [
    ({"nodes": 2.0}, "nodes"), ({"activeDeadlineSeconds": 1800.0}, "activeDeadlineSeconds"),
    ({"port": 29500.0}, "port"), ({"backoffLimit": 0.0}, "backoffLimit"),
    ({"runAsUser": 1000.0}, "runAsUser"),
])
def test_a_whole_number_written_as_a_float_is_refused(tmp_path, change, where):
    """Trial 11: JSON Schema's "integer" takes 2.0, so ``nodes: 2.0`` ended in a TypeError
    traceback at the dry run, and ``port: 29500.0`` rendered a Service Kubernetes refuses and a
    rendezvous address ``…:29500.0``."""
    with pytest.raises(ConfigError, match=rf"{where} is the number [0-9]+\.0, not a whole number"):
        jobfile.load(write(tmp_path, **change))


@pytest.mark.parametrize("change, where", [
    ({"name": "linear-demo\n"}, "name"),
    ({"resources": {"cpu": "1", "memory": "2Gi\n", "shm": "512Mi"}}, "resources.memory"),
    ({"resources": {"cpu": "1\n", "memory": "2Gi", "shm": "512Mi"}}, "resources.cpu"),
    ({"data": {"claim": "data\n", "mountPath": "/data"}}, "data.claim"),
])
def test_a_final_newline_does_not_pass_a_pattern(tmp_path, change, where):
    """Trial 12: Python's ``$`` matches before a final newline, so ``name: "linear-demo\\n"``
    rendered a Kubernetes name with a newline and ``memory: "2Gi\\n"`` ended in a ValueError
    traceback; JSON Schema's patterns are ECMA-262, where ``$`` ends the string."""
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}: .* does not match"):
        jobfile.load(write(tmp_path, **change))


@pytest.mark.parametrize("change, where", [
    ({"output": {"path": "out", "mountPath": "/out\tput"}, "checkpoint": "/out\tput/ck"},
     "output.mountPath"),
    ({"command": {"script": "train_linear.py\n"}}, "command.script"),
    ({"model": "m\0"}, "model"),
    ({"checkpoint": "/output/ck\x1b"}, "checkpoint"),
    ({"data": {"path": "da\nta", "mountPath": "/data"}}, "data.path"),
])
def test_a_control_character_in_a_path_of_the_job_is_refused(tmp_path, change, where):
    """Trial 13: a tab in a mountPath and a newline in the script rendered; a NUL in the model
    prefix reached the engine after the network was made (exit 4, "check the run options")."""
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}: .* does not match"):
        jobfile.load(write(tmp_path, **change))


def test_two_mounts_of_one_folder_written_two_ways_are_refused(tmp_path):
    """Trial 12: ``code.mountPath: /out/x`` beside ``output.mountPath: /out/./x`` rendered, and
    the real run failed in the engine ("Duplicate mount point") after creating its network."""
    path = write(tmp_path, code={"path": ".", "mountPath": "/out/x"},
                 output={"path": "out", "mountPath": "/out/./x"}, checkpoint="/out/./x/ck")
    with pytest.raises(ConfigError, match="two volumes share one mountPath"):
        jobfile.check(jobfile.load(path), gpu_variant=False, variant="cpu")


@pytest.mark.parametrize("script", ["/", "./", "code/", ".", ".."])
def test_a_script_that_names_a_folder_is_refused(tmp_path, script):
    """Trial 12: ``command.script: /`` planned ``command / --steps 300``."""
    with pytest.raises(ConfigError, match="names a folder, not a script"):
        jobfile.load(write(tmp_path, command={"script": script}))


def test_a_claim_name_past_253_characters_is_refused(tmp_path):
    """Trial 12: a 300-character claim rendered (a PVC name is a DNS subdomain, <= 253)."""
    with pytest.raises(ConfigError, match="data.claim"):
        jobfile.load(write(tmp_path, data={"claim": "a" * 300, "mountPath": "/data"}))


@pytest.mark.parametrize("arg", ["0x1F", "1_0", "017", "12:30:00", "1:30.5"])
def test_yaml_1_1_number_forms_in_args_are_refused_not_converted(tmp_path, arg):
    """Trial 15: ``args: [0x1F, 1_0, 017, 12:30:00]`` reached the process as ``31 10 15 45000``
    (PyYAML's YAML 1.1 hex, '_', octal and base 60); quoted, the text passes as written."""
    path = tmp_path / "train.yaml"
    text = yaml.safe_dump({**BASE, "command": {"script": "t.py", "args": ["--x", "ARG"]}})
    path.write_text(text.replace("ARG", arg).replace(f"'{arg}'", arg))
    with pytest.raises(ConfigError) as e:
        jobfile.load(path)
    assert f"{arg!r} is a" in e.value.cause and "write it in decimal, or quote it" in e.value.cause
    path.write_text(text.replace("ARG", f'"{arg}"').replace(f"'\"{arg}\"'", f'"{arg}"'))
    assert jobfile.load(path).args == ("--x", arg)


def test_decimal_numbers_in_args_still_read(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({**BASE, "command": {"script": "t.py",
                                                        "args": [3, -2, 0.5, 1.0e+5, 0]}}))
    assert jobfile.load(path).args == ("3", "-2", "0.5", "100000.0", "0")


def test_numbers_in_args_and_env_reach_the_process_as_written(tmp_path):
    """Trial 17: ``args: [--lr, 0.10]`` and ``1.0e-3`` reached the script as ``0.1`` and
    ``0.001``; the docs say args and env become the process's text."""
    path = tmp_path / "train.yaml"
    path.write_text("name: demo\ncommand: {script: train.py, args: [--lr, 0.10, 1.0e-3, +5, 2.50]}"
                    "\ncode: {path: ., mountPath: /code}\noutput: {path: out, mountPath: /output}"
                    "\nenv: {LR: 0.100}\n")
    spec = jobfile.load(path)
    assert spec.args == ("--lr", "0.10", "1.0e-3", "+5", "2.50")
    assert dict(spec.env)["LR"] == "0.100"


def test_yaml_1_1_booleans_in_env_are_refused_and_an_on_key_stays_text(tmp_path):
    """Trial 15: job env ``FLAG: yes`` reached the process as ``true`` (YAML 1.1); a key ``on:``
    (a GitHub workflow's) is the text ``on``, as YAML 1.2 reads it."""
    path = tmp_path / "train.yaml"
    text = yaml.safe_dump({**BASE, "env": {"FLAG": "VALUE"}})
    path.write_text(text.replace("VALUE", "yes"))
    with pytest.raises(ConfigError, match=r"'yes' is true or false in YAML 1\.1.*quote it"):
        jobfile.load(path)
    path.write_text(text.replace("VALUE", '"yes"'))
    assert dict(jobfile.load(path).env) == {"FLAG": "yes"}
    from paddlecd import files

    assert files.load_yaml("on: [push]\nx: true\n") == {"on": ["push"], "x": True}


def test_less_cpu_than_docker_gives_a_container_is_refused_for_local_at_planning(tmp_path):
    """Trial 16: ``cpu: 1m`` passed ``deploy --cluster local --dry-run``, then runc failed on the
    cgroup write ("check the run options"), naming no resources.cpu."""
    from paddlecd.deployment import stage as deploy

    job = write(tmp_path, resources={**BASE["resources"], "cpu": "1m"})
    with pytest.raises(ConfigError, match=r"resources.cpu 1m is less than the 10m \(0.01 CPU\)"):
        deploy.check_host_cpus(jobfile.load(job), host_cpus=2)
    fits = tmp_path / "fits"
    fits.mkdir()
    deploy.check_host_cpus(jobfile.load(write(fits, resources={**BASE["resources"], "cpu": "10m"})),
                           host_cpus=2)


@pytest.mark.parametrize("where", ["keys", "keys/sub", ".", "registry", "evidence", "ledger",
                                   "artifacts/m", "builds", "candidates", "logs"])
def test_a_job_folder_at_paddlecd_s_keys_or_whole_state_folder_is_refused(tmp_path, where):
    """Trial 16: output.path and data.path at ``.paddlecd/keys`` (the signing key) passed the
    dry run, and the run's hint said to chown the folder to the training user. Trial 17: the
    embedded registry's storage, the evidence, the ledger and the model store passed too."""
    from paddlecd import config
    from paddlecd.deployment import stage as deploy

    s = config.load({"state_dir": str(tmp_path / "state")}, root=tmp_path, environ={})
    (s.state / "keys").mkdir(parents=True)
    target = (s.state / where).resolve()
    for key in ("output", "data"):
        job = tmp_path / key
        job.mkdir(exist_ok=True)
        spec = jobfile.load(write(job, **{key: {"path": str(target), "mountPath": f"/{key}"}}))
        with pytest.raises(ConfigError, match=rf"{key}\.path {target} is paddlecd's "):
            deploy.check_state_paths(s, spec)
    fine = jobfile.load(write(tmp_path, output={"path": str(s.state / "train-output"),
                                                "mountPath": "/output"}))
    deploy.check_state_paths(s, fine)  # the example job's output folder


def test_an_output_folder_holding_the_state_folder_or_the_model_store_is_refused(tmp_path):
    """An output folder above the state folder (the project's root) lets the job write into the
    keys and records; one in a file:// model store lets it rewrite stored models."""
    from paddlecd import config
    from paddlecd.deployment import stage as deploy

    store = tmp_path / "store"
    s = config.load({"state_dir": str(tmp_path / "project" / ".paddlecd"),
                     "storage.url": f"file://{store}"}, root=tmp_path, environ={})
    for out, words in ((tmp_path / "project", "holds paddlecd's state folder"),
                       (store / "m", "is in (or holds) the model store"),
                       (tmp_path, "holds paddlecd's state folder")):
        spec = jobfile.load(write(tmp_path, output={"path": str(out), "mountPath": "/output"}))
        with pytest.raises(ConfigError, match=re.escape(words)):
            deploy.check_state_paths(s, spec)
    data = jobfile.load(write(tmp_path, output={"path": str(tmp_path / "out"),
                                                "mountPath": "/output"},
                              data={"path": str(tmp_path / "project"), "mountPath": "/data"}))
    deploy.check_state_paths(s, data)  # read-only data above the state folder stays allowed


@pytest.mark.parametrize("key", ["memory", "shm"])
def test_a_zero_size_gets_a_size_hint_not_the_milli_one(tmp_path, key):
    """Trial 16: ``memory: 0`` was hinted "'m' means 1/1000: write Mi or Gi"."""
    with pytest.raises(ConfigError) as e:
        jobfile.load(write(tmp_path, resources={**BASE["resources"], key: "0"}))
    assert e.value.hint == "give a size above 0, e.g. 512Mi or 4Gi"
    with pytest.raises(ConfigError) as e:
        jobfile.load(write(tmp_path, resources={**BASE["resources"], key: "100m"}))
    assert e.value.hint.startswith("'m' means 1/1000")
