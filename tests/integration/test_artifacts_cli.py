"""``invoke upload`` / ``artifacts.download`` / ``artifacts.list`` run as a user runs them: a
subprocess of the project's ``invoke`` from the repository root (support.invoke), against the
default file:// store and a real Ceph RGW (S3) over HTTP and HTTPS, with real jit.save exports."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import uuid

import boto3
import pytest
from botocore.config import Config

from paddlecd.registry.embedded import free_port

from support import INVOKE, ROOT, clean_env, invoke
from support.cli import signing_env


def _invoke(env, *args):
    return invoke(*args, env=env, timeout=300)


@pytest.fixture
def user_env(tmp_path):
    """The user's environment with the state folder (and so the default file store) in tmp_path."""
    return clean_env(
        drop=("PADDLECD_", "AWS_", "GITHUB_"), PADDLECD_STATE_DIR=str(tmp_path / "state"),
        **signing_env(),
    )


def _s3(server):
    return boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.key,
        aws_secret_access_key=server.secret,
        config=Config(s3={"addressing_style": "path"}),
    )


def test_upload_list_download_on_the_default_file_store(user_env, jit_exports, tmp_path):
    store = tmp_path / "state" / "artifacts"
    up = [
        "upload",
        "--model-dir",
        str(jit_exports["tiny"]),
        "--name",
        "ocr-det",
        "--version",
        "1.4.0",
    ]
    r = _invoke(user_env, *up)
    assert r.returncode == 0, r.stderr
    assert f"plan: create file://{store}/ocr-det/1.4.0" in r.stderr  # the plan: stderr
    assert sorted(p.name for p in (store / "ocr-det" / "1.4.0").iterdir()) == [
        "inference.json",
        "inference.pdiparams",
        "manifest.json",
        "model.sig",
    ]

    r = _invoke(user_env, *up)
    assert r.returncode == 0 and "unchanged" in r.stdout and "(0 bytes moved)" in r.stdout

    r = _invoke(user_env, "artifacts.list", "ocr-det")
    assert r.returncode == 0 and re.search(r"1\.4\.0\t.*\t2\t", r.stdout), r.stdout  # tabs: a pipe
    r = _invoke(user_env, "artifacts.download", "ocr-det/1.4.0", str(tmp_path / "dl"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports["tiny"] / "inference.pdiparams"
    ).read_bytes()
    assert "sha256 and signature verified" in r.stdout
    r = _invoke(user_env, "artifacts.show", "ocr-det@1.4.0")
    assert r.returncode == 0 and "signature   model.sig verified: key SHA256:" in r.stdout

    # the stored params replaced and the manifest made to match: only the signature tells
    version = store / "ocr-det" / "1.4.0"
    (version / "inference.pdiparams").write_bytes(b"\1" * 64)
    doc = json.loads((version / "manifest.json").read_text())
    doc["files"] = [{**f, "size": (version / f["path"]).stat().st_size,
                     "sha256": hashlib.sha256((version / f["path"]).read_bytes()).hexdigest()}
                    for f in doc["files"]]
    (version / "manifest.json").write_text(json.dumps(doc))
    for args in (("artifacts.download", "ocr-det/1.4.0", str(tmp_path / "dl2")),
                 ("artifacts.show", "ocr-det@1.4.0")):
        r = _invoke(user_env, *args)
        assert r.returncode == 6, r.stderr
        assert re.search(r"^error: .*ocr-det/1.4.0/model.sig does not sign the files "
                         r"manifest.json lists: inference.pdiparams differ", r.stderr, re.M)
        assert "\nhint: re-upload the model with --overwrite" in r.stderr
    assert not (tmp_path / "dl2").exists()


def test_upload_to_s3_dry_run_then_real(user_env, s3_server, jit_exports, tmp_path):
    bucket = f"models-{uuid.uuid4().hex[:10]}"
    _s3(s3_server).create_bucket(Bucket=bucket)
    env = {
        **user_env,
        "AWS_ACCESS_KEY_ID": s3_server.key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret,
        "AWS_DEFAULT_REGION": "us-east-1",
        "PADDLECD_STORAGE_ENDPOINT_URL": s3_server.endpoint,
    }
    up = [
        "upload",
        "--model-dir",
        str(jit_exports["tiny"]),
        "--name",
        "ocr-det",
        "--version",
        "1.4.0",
        "--to",
        f"s3://{bucket}/paddle",
        "--image",
        f"127.0.0.1:{free_port()}/paddlecd/paddle@sha256:" + "c" * 64,
    ]
    r = _invoke(env, *up, "--dry-run")
    assert r.returncode == 0 and "dry run: nothing written" in r.stderr and r.stdout == ""
    assert "inference.pdiparams" in r.stderr and "manifest.json  (last)" in r.stderr
    assert "Contents" not in _s3(s3_server).list_objects_v2(Bucket=bucket)

    r = _invoke(env, *up)
    assert r.returncode == 0, r.stderr
    assert f"uploaded: s3://{bucket}/paddle/ocr-det/1.4.0" in r.stdout
    r = _invoke(env, "artifacts.list", f"s3://{bucket}/paddle/ocr-det")
    assert r.returncode == 0 and "sha256:cccccccccc" in r.stdout

    r = _invoke(
        env,
        "upload",
        "--model-dir",
        str(jit_exports["tiny2"]),
        "--name",
        "ocr-det",
        "--version",
        "1.4.0",
        "--to",
        f"s3://{bucket}/paddle",
    )
    assert (
        r.returncode == 8
        and "already holds a different model" in r.stderr
        and "--overwrite" in r.stderr
    )


def test_upload_dry_run_names_the_store_quirk_with_a_hint(user_env, rgw_server, jit_exports):
    """Over HTTPS with botocore's own checksum default (when_supported, from the AWS environment),
    Ceph RGW refuses uploads with 411; the dry run says so, with the setting that fixes it, and
    writes nothing (its probe is an UploadPart to an upload id that cannot exist)."""
    bucket = f"models-{uuid.uuid4().hex[:10]}"
    _s3(rgw_server).create_bucket(Bucket=bucket)
    env = {**user_env, "AWS_ACCESS_KEY_ID": rgw_server.key,
           "AWS_SECRET_ACCESS_KEY": rgw_server.secret, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_CA_BUNDLE": str(rgw_server.ca_file), "AWS_REQUEST_CHECKSUM_CALCULATION":
           "when_supported", "PADDLECD_STORAGE_ENDPOINT_URL": rgw_server.https_endpoint}
    since = len(rgw_server.requests)
    r = _invoke(env, "upload", "--model-dir", str(jit_exports["tiny"]), "--name", "ocr-det",
                "--version", "1.4.0", "--to", f"s3://{bucket}/paddle", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "  store refuses aws-chunked uploads with checksum trailers over HTTPS (HTTP 411): " \
        "uploads will fail\n  hint: set storage.checksum_mode: when_required" in r.stderr
    assert "Contents" not in _s3(rgw_server).list_objects_v2(Bucket=bucket)
    assert [line for line in rgw_server.requests[since:] if re.search(r'" 2\d\d', line)
            and re.search(r'"(PUT|POST|DELETE) ', line)] == []  # the probe was refused: 411


def test_upload_to_s3_json_names_the_stored_manifest(user_env, s3_server, jit_exports):
    """`upload --json` prints the URL and the sha256 of manifest.json as S3 holds it."""
    import hashlib
    import json

    bucket = f"models-{uuid.uuid4().hex[:10]}"
    s3 = _s3(s3_server)
    s3.create_bucket(Bucket=bucket)
    env = {
        **user_env,
        "AWS_ACCESS_KEY_ID": s3_server.key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret,
        "AWS_DEFAULT_REGION": "us-east-1",
        "PADDLECD_STORAGE_ENDPOINT_URL": s3_server.endpoint,
    }
    # a registry nothing answers on (the image's label cannot be read: recorded as unknown),
    # never :5000, where a developer's or the demo's registry may run and answer 404 (fatal)
    image = f"127.0.0.1:{free_port()}/paddlecd/paddle@sha256:" + "d" * 64
    r = _invoke(
        env,
        "upload",
        "--model-dir",
        str(jit_exports["tiny"]),
        "--name",
        "ocr-det",
        "--version",
        "2.0.0",
        "--to",
        f"s3://{bucket}/p",
        "--image",
        image,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    stored = s3.get_object(Bucket=bucket, Key="p/ocr-det/2.0.0/manifest.json")["Body"].read()
    assert doc["url"] == f"s3://{bucket}/p/ocr-det/2.0.0" and doc["action"] == "create"
    assert doc["manifest_digest"] == "sha256:" + hashlib.sha256(stored).hexdigest()
    assert doc["files"] == len(json.loads(stored)["files"]) and doc["image_digest"] == image[-71:]


@pytest.mark.parametrize(
    ("args", "code", "cause"),
    [
        (
            ["--model-dir", "{empty}", "--name", "ocr-det", "--version", "1.4.0"],
            2,
            "is not a paddle.jit.save export",
        ),
        (
            ["--model-dir", "{tiny}", "--name", "OCR_det", "--version", "1.4.0"],
            2,
            "invalid model name 'OCR_det'",
        ),
        (
            ["--model-dir", "{tiny}", "--name", "ocr-det", "--version", "1.4"],
            2,
            "invalid model version '1.4'",
        ),
        (
            [
                "--model-dir",
                "{tiny}",
                "--name",
                "ocr-det",
                "--version",
                "1.4.0",
                "--to",
                "s3:///paddle",
            ],
            2,
            "store URL 's3:///paddle' has no bucket",
        ),
        (
            [
                "--model-dir",
                "{tiny}",
                "--name",
                "ocr-det",
                "--version",
                "1.4.0",
                "--image",
                "reg/paddle:3.0",
            ],
            2,
            "image reference 'reg/paddle:3.0' has no digest",
        ),
        (
            [
                "--model-dir",
                "{tiny}",
                "--name",
                "ocr-det",
                "--version",
                "1.4.0",
                "--to",
                "s3://no-such-bucket-4",
            ],
            8,
            "bucket 'no-such-bucket-4' does not exist",
        ),
        (
            [
                "--model-dir",
                "{tiny}",
                "--name",
                "ocr-det",
                "--version",
                "1.4.0",
                "--to",
                "s3://models",
                "--metrics",
                "{empty}/m.json",
            ],
            2,
            "metrics file",
        ),
    ],
)
def test_bad_input_is_one_line_error_and_writes_nothing(
    user_env, s3_server, jit_exports, tmp_path, args, code, cause
):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        **user_env,
        "AWS_ACCESS_KEY_ID": s3_server.key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret,
        "PADDLECD_STORAGE_ENDPOINT_URL": s3_server.endpoint,
    }
    args = [a.format(empty=empty, tiny=jit_exports["tiny"]) for a in args]
    since = len(s3_server.requests)
    r = _invoke(env, "upload", *args)
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 2
        and lines[0].startswith("error: ")
        and cause in lines[0]
        and lines[1].startswith("hint: ")
    )
    assert "Traceback" not in r.stderr and s3_server.secret not in r.stdout + r.stderr
    assert not (tmp_path / "state" / "artifacts").exists()
    assert not any(re.search(r'"(PUT|POST|DELETE) ', line) for line in s3_server.requests[since:])


def test_unreachable_endpoint_from_the_command_line(user_env, jit_exports):
    endpoint = f"http://127.0.0.1:{free_port()}"
    env = {
        **user_env,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PADDLECD_STORAGE_ENDPOINT_URL": endpoint,
    }
    r = _invoke(
        env,
        "upload",
        "--model-dir",
        str(jit_exports["tiny"]),
        "--name",
        "ocr-det",
        "--version",
        "1.4.0",
        "--to",
        "s3://models",
    )
    assert r.returncode == 8
    assert (
        r.stderr.splitlines()[0] == f"error: opening s3://models: cannot reach endpoint {endpoint}"
    )


def test_two_uploads_of_one_version_at_once_one_wins_the_other_exits_8(
    project_root, user_env, jit_exports, tmp_path
):
    """Whatever the interleaving, one process uploads, the other refuses with exit 8."""
    argv = [INVOKE, "upload", "--name", "ocr-det", "--version", "1.4.0", "--model-dir"]
    procs = [
        subprocess.Popen(
            [*argv, str(jit_exports[m])],
            cwd=project_root,
            env=user_env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for m in ("tiny", "tiny2")
    ]
    results = [(p.wait(300), *p.communicate()) for p in procs]
    assert sorted(rc for rc, _, _ in results) == [0, 8], results
    winner = ("tiny", "tiny2")[[rc for rc, _, _ in results].index(0)]
    _, out, err = next(r for r in results if r[0] == 8)
    # stderr: the plan (progress goes there), then the one error line and its hint
    assert "uploaded:" not in out and "\nerror: " in "\n" + err and "hint: " in err
    assert "Traceback" not in err
    r = _invoke(user_env, "artifacts.download", "ocr-det/1.4.0", str(tmp_path / "dl"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports[winner] / "inference.pdiparams"
    ).read_bytes()


def test_list_shows_an_interrupted_upload_as_incomplete(user_env, jit_exports, tmp_path):
    """A version without manifest.json (a killed upload) made artifacts.list raise
    KeyError."""
    r = _invoke(
        user_env,
        "upload",
        "--model-dir",
        str(jit_exports["tiny"]),
        "--name",
        "ocr-det",
        "--version",
        "1.4.0",
    )
    assert r.returncode == 0, r.stderr
    leftover = tmp_path / "state" / "artifacts" / "ocr-det" / "1.5.0"
    leftover.mkdir()
    (leftover / "inference.json").write_text("{}")
    r = _invoke(user_env, "artifacts.list", "ocr-det")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^1\.4\.0\s+\S+\s+2\s", r.stdout, re.M), r.stdout
    assert re.search(r"^1\.5\.0\s+incomplete", r.stdout, re.M), r.stdout


class _HoldingProxy:
    """An HTTP relay in front of an S3 server that holds each request whose target contains
    ``held`` (e.g. ``partNumber=2``): its body is read and no answer ever comes, as from a store
    that stalls. Every other request is forwarded. ``seen`` is set once it holds one."""

    def __init__(self, upstream: str, held: str):
        import http.client
        import http.server
        import threading
        from urllib.parse import urlsplit

        target, relay = urlsplit(upstream), self
        self.seen, self.released = threading.Event(), threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if held in self.path:
                    relay.seen.set()
                    relay.released.wait(600)
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "expect")}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response_only(answer.status, answer.reason)
                for k, v in answer.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def test_ctrl_c_during_a_held_multipart_part_ends_at_once_with_130_and_aborts_the_upload(
    user_env, rgw_server, jit_exports
):
    """A trial (issue 21): Ctrl-C while one part of a multipart upload hung kept the upload
    running 239 s (s3transfer waits for every part in flight, up to botocore's read timeout
    times its attempts), then exited 8 naming a read timeout. Now it ends in seconds, exit 130,
    says it was interrupted, leaves no open multipart upload and no claim, and the same
    command, re-run, stores the model. Real Ceph RGW behind a relay that holds part 2."""
    import signal

    s3 = _s3(rgw_server)
    bucket = f"models-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    proxy = _HoldingProxy(rgw_server.endpoint, "partNumber=2")
    env = {**user_env, "AWS_ACCESS_KEY_ID": rgw_server.key,
           "AWS_SECRET_ACCESS_KEY": rgw_server.secret, "AWS_DEFAULT_REGION": "us-east-1",
           "PADDLECD_STORAGE_ENDPOINT_URL": proxy.endpoint,
           "PADDLECD_STORAGE_MULTIPART_THRESHOLD_MB": "5",
           "PADDLECD_STORAGE_MULTIPART_CHUNK_MB": "5"}  # 4 parts, sent at once
    up = ["upload", "--model-dir", str(jit_exports["big"]), "--name", "ocr-det", "--version",
          "1.4.0", "--to", f"s3://{bucket}/paddle"]
    run = subprocess.Popen([INVOKE, *up], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proxy.seen.wait(120), "the upload never reached part 2"
        run.send_signal(signal.SIGINT)
        # the part stays held until the proxy closes: waiting for it would take botocore's read
        # timeout (60 s) at least, so an upload that waits runs past this and fails the test
        out, err = run.communicate(timeout=45)
    finally:
        proxy.close()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "error: interrupted" in err and "Traceback" not in err and "read timeout" not in err
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert not any(k.endswith("manifest.json") or "/.claims/" in k for k in left), left
    again = _invoke({**env, "PADDLECD_STORAGE_ENDPOINT_URL": rgw_server.endpoint}, *up)
    assert again.returncode == 0 and "uploaded: " in again.stdout, again.stderr


def test_ctrl_c_during_a_held_download_ends_at_once_with_130_and_leaves_no_temp(
    user_env, rgw_server, jit_exports, tmp_path
):
    """Trial 9: Ctrl-C of ``artifacts.download`` with the body stalled exited after 300 s (the
    transfer's threads waited out their read timeouts). Now it ends in seconds, exit 130, leaves
    no destination and no temp folder, and the same command, re-run, downloads. Real Ceph RGW
    behind a relay that holds the parameters' GETs."""
    import signal

    s3 = _s3(rgw_server)
    bucket = f"models-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    env = {**user_env, "AWS_ACCESS_KEY_ID": rgw_server.key,
           "AWS_SECRET_ACCESS_KEY": rgw_server.secret, "AWS_DEFAULT_REGION": "us-east-1",
           "PADDLECD_STORAGE_ENDPOINT_URL": rgw_server.endpoint}
    up = _invoke(env, "upload", "--model-dir", str(jit_exports["big"]), "--name", "ocr-det",
                 "--version", "1.4.0", "--to", f"s3://{bucket}/paddle")
    assert up.returncode == 0, up.stderr
    proxy = _HoldingProxy(rgw_server.endpoint, ".pdiparams")
    dest = tmp_path / "out" / "model"
    down = ["artifacts.download", f"s3://{bucket}/paddle/ocr-det/1.4.0", str(dest)]
    run = subprocess.Popen([INVOKE, *down], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env={**env, "PADDLECD_STORAGE_ENDPOINT_URL": proxy.endpoint})
    try:
        assert proxy.seen.wait(120), "the download never asked for the parameters"
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=45)  # a download that waits runs past this
    finally:
        proxy.close()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "error: interrupted" in err and "Traceback" not in err
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    again = _invoke(env, *down)
    assert again.returncode == 0 and (dest / "manifest.json").is_file(), again.stderr
