"""Before a node's launcher starts: record this node's facts and wait — bounded — for the master.

Run by ``invoke verify --nodes N`` on every node as
``python /smoke/rendezvous.py --rank R --master HOST:PORT --out DIR --timeout S -- <launch argv>``.
It writes ``DIR/node-R.json`` (hostname, rank, GPU model/count, driver), then on ranks other than 0
resolves and connects to the master until ``--timeout`` seconds have passed, and finally execs the
launcher. paddle.distributed.launch itself waits for the master without a bound (a wrong master
name or a blocked port would hang the job until its deadline); this fails in seconds instead, with
exit code 3 and one line naming the address. Standard library only.

``--report`` (Kubernetes, where ``DIR`` is the pod's own emptyDir): the launcher runs as a child
instead of being exec'd, and every JSON file in ``DIR`` (the node's facts, rank 0's result) is
printed as one ``##paddlecd-result <file> <json>`` line (:data:`MARK`) so it can be read back from
the pod's log; the exit code is the launcher's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

MARK = "##paddlecd-result"  # paddlecd.verify.nodes_k8s.MARK reads these lines back


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


def report(out: Path) -> None:
    """Print every JSON file in ``out`` as one marked line (sorted, so node facts come first)."""
    for path in sorted(out.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:  # a result cut short is reported as missing by verify, not here
            continue
        print(f"{MARK} {path.name} {json.dumps(data, separators=(',', ':'))}", flush=True)


def launch(argv: list[str], out: Path, *, report_too: bool) -> None:
    """Exec the launcher; with ``report_too`` run it as a child (SIGTERM forwarded), then report."""
    if not report_too:
        os.execvp(argv[0], argv)
    child = subprocess.Popen(argv)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())  # the pod is being stopped
    code = child.wait()
    report(out)
    sys.exit(code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--report", action="store_true", help="print the JSON results as marked lines")
    ap.add_argument("launch", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    out = Path(args.out)
    node = facts(args.rank)
    (out / f"node-{args.rank}.json").write_text(json.dumps(node))
    print(f"rendezvous: rank {args.rank} on {node['hostname']}, master {args.master}", flush=True)
    if args.rank != 0:
        why = reach(args.master, args.timeout)
        if why:
            print(f"rendezvous: rank {args.rank} cannot reach the master {args.master} within "
                  f"{args.timeout:g}s ({why})", flush=True)
            if args.report:
                report(out)
            sys.exit(3)
    argv = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    launch(argv, out, report_too=args.report)


if __name__ == "__main__":
    main()
