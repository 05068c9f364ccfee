"""Upload throughput of ``paddlecd`` artifacts vs bare boto3, side by side, against moto's S3
server.

Usage: .venv/bin/python benchmarks/bench_upload.py [--mb 200] [--rounds 6] [--quick]

One ~200 MB ``paddle.jit.save`` export (``paddle.nn.Linear(4, N)``, made by Paddle on the CPU) is
uploaded in alternating rounds by (a) bare ``boto3`` ``upload_file`` for each file and (b)
``artifacts.plan_upload`` + ``artifacts.upload`` (which also hashes every file and writes the
manifest), both with the same ``TransferConfig`` (from the storage defaults: 64 MiB threshold,
16 MiB parts, 4 threads). The S3 server runs in its own process (``python -m moto.server``) so it
does not share the GIL with the client. Then an unchanged re-upload is run and the object bytes it
moved are counted through boto3's progress callback. Issue 4 target: ratio >= 0.95, 0 bytes.
paddlecd signs the export (``model.sig``, OpenSSF Model Signing, a key of a temporary folder) as
``invoke upload`` does; ``--unsigned`` measures it without.
``--quick`` (2 MB, one round) is what tests/integration/test_benchmarks.py runs; nothing is written
outside a temporary folder and the S3 server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import requests
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from paddlecd.artifacts import signature  # noqa: E402
from paddlecd.artifacts import transfer as artifacts  # noqa: E402
from paddlecd.artifacts.storage import open_store  # noqa: E402
from paddlecd.artifacts.storage.s3 import transfer_config  # noqa: E402
from paddlecd.config import StorageSettings  # noqa: E402
from paddlecd.localstack import free_port  # noqa: E402
from paddlecd.verify import keys  # noqa: E402

JIT_SAVE = """
import sys, paddle
from paddle.static import InputSpec
paddle.jit.save(paddle.nn.Linear(4, int(sys.argv[2])), sys.argv[1] + "/inference",
                input_spec=[InputSpec([None, 4], "float32")])
"""


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(endpoint + "/moto-api/", timeout=1)
            return server, endpoint
        except requests.ConnectionError:
            time.sleep(0.1)
    raise SystemExit("moto server did not start")


def bare_upload(client, bucket: str, folder: Path, key_prefix: str, cfg) -> int:
    moved = 0
    for f in sorted(folder.iterdir()):
        client.upload_file(str(f), bucket, f"{key_prefix}/{f.name}", Config=cfg)
        moved += f.stat().st_size
    return moved


def empty(client, bucket: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=o["Key"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--mb", type=int, default=200, help="size of the parameters file in MB (1e6 bytes)"
    )
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="2 MB, one round (what the test runs)")
    ap.add_argument("--unsigned", action="store_true", help="upload without model.sig")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.rounds = 2, 1
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
    )
    server, endpoint = start_moto()
    try:
        run(endpoint, args.mb, args.rounds, signed=not args.unsigned)
    finally:
        server.terminate()
        server.wait()


def _signer(folder: Path) -> signature.ModelSigner:
    """A model signer with a fresh key pair under ``folder``."""
    private, _ = keys.keygen(folder / "keys")
    return signature.ModelSigner(private.read_bytes(), str(private))


def run(endpoint: str, mb: int, rounds: int, *, signed: bool = True) -> None:
    settings = StorageSettings(endpoint_url=endpoint)
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(
            s3={"addressing_style": "path"}, request_checksum_calculation="when_required"
        ),
    )
    for b in ("bare", "tool"):
        client.create_bucket(Bucket=b)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as key_dir:
        model = Path(tmp)
        signer = _signer(Path(key_dir)) if signed else None
        subprocess.run(
            [sys.executable, "-c", JIT_SAVE, str(model), str(mb * 1_000_000 // 20)],
            check=True,
            capture_output=True,
        )
        total = sum(f.stat().st_size for f in model.iterdir())
        store, cfg = open_store("s3://tool/paddle", settings), transfer_config(settings)
        bare_s, tool_s = [], []
        for i in range(
            rounds
        ):  # ABBA order, and an emptied server, so neither side gets a warmer one
            for side in (("bare", "tool") if i % 2 == 0 else ("tool", "bare")):
                t = time.perf_counter()
                if side == "bare":
                    bare_upload(client, "bare", model, f"paddle/bench/1.0.{i}", cfg)
                else:
                    artifacts.upload(store, artifacts.plan_upload(
                        store, model, name="bench", version=f"1.0.{i}", signer=signer))
                (bare_s if side == "bare" else tool_s).append(time.perf_counter() - t)
                if i < rounds - 1:
                    empty(client, side)
        moved = []
        t = time.perf_counter()
        plan = artifacts.plan_upload(store, model, name="bench", version=f"1.0.{rounds - 1}",
                                     signer=signer)
        artifacts.upload(store, plan, progress=moved.append)
        reupload_s = time.perf_counter() - t
    bare_mbs, tool_mbs = (
        total / statistics.median(bare_s) / 1e6,
        total / statistics.median(tool_s) / 1e6,
    )
    print(
        f"model: {total / 1e6:.1f} MB (paddle.jit.save, Linear(4, {mb * 1_000_000 // 20})), "
        f"rounds: {rounds}, transfer: {cfg.multipart_threshold >> 20} MiB threshold, "
        f"{cfg.multipart_chunksize >> 20} MiB parts, {cfg.max_concurrency} threads"
    )
    print(
        f"bare boto3 upload_file : median {statistics.median(bare_s):.2f} s  {bare_mbs:7.1f} MB/s  "
        f"(runs {', '.join(f'{s:.2f}' for s in bare_s)})"
    )
    print(
        f"paddlecd upload        : median {statistics.median(tool_s):.2f} s  {tool_mbs:7.1f} MB/s  "
        f"(runs {', '.join(f'{s:.2f}' for s in tool_s)}; includes sha256 + manifest"
        f"{' + model.sig' if signed else ''})"
    )
    print(f"throughput ratio paddlecd / boto3: {tool_mbs / bare_mbs:.3f} (medians), "
          f"{min(bare_s) / min(tool_s):.3f} (best runs)  (target >= 0.95)")
    print(f"unchanged re-upload: action={plan.action}, {sum(moved)} object bytes moved "
          f"(plan: {plan.bytes_to_move}), {reupload_s:.2f} s (hashing + manifest read)")


if __name__ == "__main__":
    main()
