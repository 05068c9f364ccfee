"""`invoke doctor` as a user runs it, against the real engine, the TLS + htpasswd registry fixture
and a real Ceph RGW (S3, HTTP and HTTPS). The test machines have no GPU: doctor must say so and
not fail a CPU-only configuration (on a GPU host the driver line is checked against the table
instead)."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from conftest import PASSWORD, USER

from paddlecd.registry.embedded import free_port
from paddlecd.verify import drivers

from support import cli_env, invoke

HAS_GPU = drivers.host_gpus()[0] is not None


def lines(run):
    """``{check name: line}`` from doctor's text output."""
    out = {}
    for line in run.stdout.splitlines():
        parts = line.split(None, 1)
        if parts and parts[0] in ("OK", "WARN", "FAIL", "SKIP"):
            name = next(
                n
                for n in (
                    "engine",
                    "registry",
                    "release registry",
                    "gpu driver",
                    "nvidia runtime",
                    "disk",
                    "state",
                    "storage",
                    "kubeconfig",
                    "keys",
                )
                if parts[1].startswith(n)
            )
            out[name] = line
    return out


def test_cpu_only_configuration_passes_and_says_there_is_no_gpu(registry, tmp_path):
    run = invoke("doctor", "--variant", "cpu", env=cli_env(registry, tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    rows = lines(run)
    assert set(rows) == {
        "engine",
        "registry",
        "release registry",
        "gpu driver",
        "nvidia runtime",
        "disk",
        "state",
        "storage",
        "kubeconfig",
        "keys",
    }
    assert rows["engine"].startswith("OK") and "BuildKit" in rows["engine"]
    assert rows["registry"].startswith("OK") and f"logged in as {USER}" in rows["registry"]
    assert rows["release registry"].startswith("SKIP")
    assert rows["state"].startswith("OK") and "writable" in rows["state"]
    if not HAS_GPU:
        assert (
            rows["gpu driver"].startswith("OK")
            and "no GPU on this host; only CPU variants in use" in rows["gpu driver"]
        )
    assert PASSWORD not in run.stdout + run.stderr


def test_gpu_variants_without_gpu_warn_and_fail_only_with_require_gpu(registry, tmp_path):
    if HAS_GPU:
        pytest.fail(
            "this test describes a host without a GPU; on a GPU host test_doctor_rules covers the "
            "driver rules"
        )
    run = invoke("doctor", env=cli_env(registry, tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert lines(run)["gpu driver"].startswith("WARN") and "cu126" in lines(run)["gpu driver"]
    strict = invoke("doctor", "--require-gpu", env=cli_env(registry, tmp_path))
    assert strict.returncode == 11
    assert lines(strict)["gpu driver"].startswith("FAIL") and "error: doctor: " in strict.stderr


def test_wrong_registry_password_fails_with_a_login_hint(registry, tmp_path):
    config_dir = registry.docker_config(tmp_path / "bad-docker-config", USER, "not-the-password")
    run = invoke(
        "doctor", "--variant", "cpu", env=cli_env(registry, tmp_path, DOCKER_CONFIG=str(config_dir))
    )
    assert run.returncode == 11
    row = lines(run)["registry"]
    assert row.startswith("FAIL") and "hint:" in run.stdout.split(row, 1)[1].splitlines()[1]
    assert "registry" in run.stderr and "not-the-password" not in run.stdout + run.stderr


def test_registry_down_fails(registry, tmp_path):
    run = invoke("doctor", "--variant", "cpu", env=cli_env(registry, tmp_path,
                                                            PADDLECD_REGISTRY_URL=f"127.0.0.1:{free_port()}"))
    assert run.returncode == 11 and "unreachable" in lines(run)["registry"]


def test_a_separate_release_registry_is_checked_too(registry, tmp_path):
    """Trial 11: with release.registry down, doctor passed (exit 0) and the release pipeline
    stopped at promote."""
    down = invoke("doctor", "--variant", "cpu", env=cli_env(
        registry, tmp_path, PADDLECD_RELEASE_REGISTRY=f"127.0.0.1:{free_port()}"))
    assert down.returncode == 11, down.stdout + down.stderr
    assert lines(down)["release registry"].startswith("FAIL")
    assert "unreachable" in lines(down)["release registry"]
    assert lines(down)["registry"].startswith("OK")


def test_s3_store_bucket_and_credentials(registry, s3_env, tmp_path):
    bucket = f"doctor-{uuid.uuid4().hex[:10]}"
    env = cli_env(registry, tmp_path, PADDLECD_STORAGE_URL=f"s3://{bucket}/paddle")
    missing = invoke("doctor", "--variant", "cpu", "--log-format", "json", env=env)
    assert missing.returncode == 11 and '"check": "storage"' in missing.stdout
    assert (
        '"status": "fail"'
        in [line for line in missing.stdout.splitlines() if '"storage"' in line][0]
    )
    boto3.client("s3", endpoint_url=s3_env.endpoint, region_name="us-east-1").create_bucket(
        Bucket=bucket
    )
    ok = invoke("doctor", "--variant", "cpu", env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (
        lines(ok)["storage"].startswith("OK")
        and f"s3://{bucket}/paddle reachable" in lines(ok)["storage"]
    )

    # over HTTPS with botocore's own checksum default, RGW refuses every upload (411): named
    https = {**env, "PADDLECD_STORAGE_ENDPOINT_URL": s3_env.https_endpoint,
             "AWS_CA_BUNDLE": str(s3_env.ca_file), "AWS_REQUEST_CHECKSUM_CALCULATION":
             "when_supported"}
    quirk = invoke("doctor", "--variant", "cpu", "--log-format", "json", env=https)
    [row] = [json.loads(line) for line in quirk.stdout.splitlines() if '"storage"' in line]
    assert quirk.returncode == 11 and row["status"] == "fail", quirk.stdout + quirk.stderr
    assert "refuses aws-chunked uploads" in row["detail"]
    assert row["hint"].startswith("set storage.checksum_mode: when_required")
