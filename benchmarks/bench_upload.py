"""Upload throughput of ``paddlecd`` artifacts vs bare boto3, side by side, against moto's S3
server and a real Ceph RGW (HTTP and HTTPS).

Usage: .venv/bin/python benchmarks/bench_upload.py [--mb 200] [--rounds 6] [--quick]
       [--store moto,rgw,rgw-https]

One ~200 MB ``paddle.jit.save`` export (``paddle.nn.Linear(4, N)``, made by Paddle on the CPU) is
uploaded in alternating rounds by (a) bare ``boto3`` ``upload_file`` for each file and (b)
``artifacts.plan_upload`` + ``artifacts.upload`` (which also hashes every file and writes the
manifest), both with the same ``TransferConfig`` (from the storage defaults: 64 MiB threshold,
16 MiB parts, 4 threads). Each S3 server runs in its own processes so it does not share the GIL
with the client: ``python -m moto.server``, and Ceph RGW 16 (one mon, a memstore OSD and radosgw,
tests/support/rgw.py; its HTTPS endpoint with its own CA). Then an unchanged re-upload is run and
the object bytes it moved are counted through boto3's progress callback. Target: ratio >=
0.95, 0 bytes. The last lines put the stores side by side. paddlecd signs the export
(``model.sig``, OpenSSF Model Signing, a key of a temporary folder) as ``invoke upload`` does;
``--unsigned`` measures it without. ``--quick`` (2 MB, one round) is what
tests/integration/test_benchmarks.py runs; nothing is written outside a temporary folder and the
S3 servers.
"""

from __future__ import annotations

import argparse
import contextlib
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from paddlecd.artifacts import signature as sig  # noqa: E402
from paddlecd.artifacts import transfer as arts  # noqa: E402
from paddlecd.artifacts.storage import open_store  # noqa: E402
from paddlecd.artifacts.storage.s3 import transfer_config  # noqa: E402
from paddlecd.config import StorageSettings  # noqa: E402
from paddlecd.registry.embedded import free_port  # noqa: E402
from paddlecd.signing import keys  # noqa: E402

from support import rgw  # noqa: E402

STORES = ("moto", "rgw", "rgw-https")

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
    ap.add_argument("--store", default=",".join(STORES), help=f"some of {', '.join(STORES)}")
    ap.add_argument("--unsigned", action="store_true", help="upload without model.sig")
    args = ap.parse_args()
    stores = [s for s in args.store.split(",") if s]
    if not stores or set(stores) - set(STORES):
        ap.error(f"--store {args.store!r}: give some of {', '.join(STORES)}, comma-separated")
    if args.quick:
        args.mb, args.rounds = 2, 1
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    rows = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        ceph: list[rgw.RgwServer] = []  # one cluster serves both rgw and rgw-https
        model = Path(tmp) / "model"
        subprocess.run([sys.executable, "-c", JIT_SAVE, str(model), str(args.mb * 50_000)],
                       check=True, capture_output=True)
        for name in stores:
            endpoint = serve(name, Path(tmp), ceph, servers)
            print(f"== {name}: {endpoint}")
            signer = None if args.unsigned else _signer(Path(tmp) / f"keys-{name}")
            rows.append((name, *run(endpoint, model, args.rounds, name, signer)))
    print("side by side (medians, MB/s):  store       boto3  paddlecd  ratio")
    for name, bare, tool in rows:
        print(f"  {name:<10} {bare:7.1f}  {tool:8.1f}  {tool / bare:5.3f}")


def serve(name: str, tmp: Path, ceph: list[rgw.RgwServer], servers: contextlib.ExitStack) -> str:
    """Start the store ``name`` (stopped when ``servers`` closes; the Ceph cluster once, kept in
    ``ceph``), point the AWS environment at its user (and CA), and return its endpoint."""
    os.environ.pop("AWS_CA_BUNDLE", None)
    if name == "moto":
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
        server, endpoint = start_moto()
        servers.callback(server.wait)
        servers.callback(server.terminate)
        return endpoint
    if not ceph:
        ceph.append(rgw.RgwServer(tmp / "rgw"))
        servers.callback(ceph[0].stop)
        ceph[0].start()
    os.environ.update(AWS_ACCESS_KEY_ID=ceph[0].key, AWS_SECRET_ACCESS_KEY=ceph[0].secret)
    if name == "rgw-https":
        os.environ["AWS_CA_BUNDLE"] = str(ceph[0].ca_file)
        return ceph[0].https_endpoint
    return ceph[0].endpoint


def _signer(folder: Path) -> sig.ModelSigner:
    """A model signer with a fresh key pair under ``folder``."""
    private, _ = keys.keygen(folder)
    return sig.ModelSigner(private.read_bytes(), str(private))


def run(endpoint: str, model: Path, rounds: int, name: str,
        signer: sig.ModelSigner | None = None) -> tuple[float, float]:
    """Measure one store (buckets ``bare-<name>``, ``tool-<name>``) with the export ``model``;
    print its figures; return the median MB/s of boto3 and paddlecd."""
    settings = StorageSettings(endpoint_url=endpoint)
    client = boto3.session.Session().client(  # a new session: credentials of this store
        "s3",
        endpoint_url=endpoint,
        config=Config(
            s3={"addressing_style": "path"}, request_checksum_calculation="when_required"
        ),
    )
    bare, tool = f"bare-{name}", f"tool-{name}"
    for b in (bare, tool):
        client.create_bucket(Bucket=b)
    total = sum(f.stat().st_size for f in model.iterdir())
    store, cfg = open_store(f"s3://{tool}/paddle", settings), transfer_config(settings)
    bare_s, tool_s = [], []
    for i in range(
        rounds
    ):  # ABBA order, and an emptied server, so neither side gets a warmer one
        for side in (("bare", "tool") if i % 2 == 0 else ("tool", "bare")):
            t = time.perf_counter()
            if side == "bare":
                bare_upload(client, bare, model, f"paddle/bench/1.0.{i}", cfg)
            else:
                arts.upload(
                    store, arts.plan_upload(store, model, name="bench", version=f"1.0.{i}",
                                                 signer=signer)
                )
            (bare_s if side == "bare" else tool_s).append(time.perf_counter() - t)
            if i < rounds - 1:
                empty(client, bare if side == "bare" else tool)
    moved = []
    t = time.perf_counter()
    plan = arts.plan_upload(store, model, name="bench", version=f"1.0.{rounds - 1}",
                                 signer=signer)
    arts.upload(store, plan, progress=moved.append)
    reupload_s = time.perf_counter() - t
    bare_mbs, tool_mbs = (
        total / statistics.median(bare_s) / 1e6,
        total / statistics.median(tool_s) / 1e6,
    )
    print(
        f"model: {total / 1e6:.1f} MB (paddle.jit.save of a paddle.nn.Linear), "
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
        f"{' + model.sig' if signer else ''})"
    )
    print(f"throughput ratio paddlecd / boto3: {tool_mbs / bare_mbs:.3f} (medians), "
          f"{min(bare_s) / min(tool_s):.3f} (best runs)  (target >= 0.95)")
    print(f"unchanged re-upload: action={plan.action}, {sum(moved)} object bytes moved "
          f"(plan: {plan.bytes_to_move}), {reupload_s:.2f} s (hashing + manifest read)")
    return bare_mbs, tool_mbs


if __name__ == "__main__":
    main()
