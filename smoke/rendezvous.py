"""Before a node's launcher starts: record this node's facts and wait — bounded — for the master.

Run by ``invoke verify --nodes N`` on every node as
``python /smoke/rendezvous.py --rank R --master HOST:PORT --out DIR --timeout S -- <launch argv>``.
It writes ``DIR/node-R.json`` (hostname, rank, GPU model/count, driver), then on ranks other than 0
resolves and connects to the master until ``--timeout`` seconds have passed, and finally execs the
launcher. paddle.distributed.launch itself waits for the master without a bound (a wrong master
name or a blocked port would hang the job until its deadline); this fails in seconds instead, with
exit code 3 and one line naming the address. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def facts(rank: int) -> dict:
    gpus, driver = [], None
    if shutil.which("nvidia-smi"):  # GPU-only: the cards and driver this node gives the job
        query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        rows = subprocess.run(query, capture_output=True, text=True).stdout.strip().splitlines()
        gpus = [r.split(",")[0].strip() for r in rows]
        driver = rows[0].split(",")[-1].strip() if rows else None
    return {"rank": rank, "hostname": socket.gethostname(), "gpu": gpus[0] if gpus else None,
            "gpus": len(gpus), "driver": driver}


def reach(master: str, timeout: float) -> str | None:
    """None once ``master`` (host:port) accepts a TCP connection, else why not after ``timeout``."""
    host, _, port = master.rpartition(":")
    deadline, why = time.monotonic() + timeout, "no attempt"
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return None
        except OSError as e:  # not resolvable yet, refused or filtered: retry until the deadline
            why = f"{type(e).__name__}: {e}"
            time.sleep(1)
    return why


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("launch", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    Path(args.out, f"node-{args.rank}.json").write_text(json.dumps(facts(args.rank)))
    if args.rank != 0:
        why = reach(args.master, args.timeout)
        if why:
            print(f"rendezvous: rank {args.rank} cannot reach the master {args.master} within "
                  f"{args.timeout:g}s ({why})", flush=True)
            sys.exit(3)
    argv = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
