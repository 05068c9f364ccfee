"""Benchmark: paddlecd build+push vs plain `docker build` + `docker push` of the same Dockerfile.

Side by side in one run, against a fresh distribution registry on 127.0.0.1 and the cpu base
bootstrapped into it (debootstrap + PyPI paddlepaddle; cached by the engine after the first time):
  cold    both build with --no-cache and push the new layers;
  cached  both rebuild from a warm cache and push (nothing changed);
and the layer bytes a no-op rebuild+push uploads (registry blob store growth, and the push stream's
"Pushed" vs "Layer already exists" counts). Target: toolkit overhead <= 5%, no-op 0 bytes.

Run: .venv/bin/python benchmarks/bench_build_push.py [--rounds 2] [--quick] [--profile]
[--profile-cold] [--base-from HOST:PORT]
Rounds alternate which side goes first; the build and push phases are timed apart and each run is
printed, so a gap can be placed (and a noisy round seen) before anything is profiled.
``--profile`` also runs one cached build+push under cProfile and prints where its wall time goes:
the engine's own work (the builder subprocess and the push stream) against paddlecd's
("profile, don't guess"), and paddlecd's part split into the builder probe, git, engine inspects,
the digest read-back and the lock check. ``--profile-cold`` does the same for a ``--no-cache``
build+push.
``--quick`` is one round whose paddlecd runs are profiled (what tests/integration/test_benchmarks.py
runs: every part runs, two builds fewer, its figures carry the profiler's overhead).
``--base-from`` copies the cpu base's compressed blobs from a plain-HTTP registry that has it
(``skopeo copy``, ~2 s) instead of pushing it again (gzip of 1.1 GB, ~40 s); the base is not what
is measured, and the suite's seed registry has it (tests/support/base.py).
Registry, lock and candidate records live in a temporary folder: the project's ``.paddlecd/`` is
never touched (a run once left ``.paddlecd/candidates/cpu.json`` pointing at its throw-away
repository).
Not a test: prints a table; nothing asserts on time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from paddlecd import config, engine, git  # noqa: E402
from paddlecd.image import bootstrap, lock, variants  # noqa: E402
from paddlecd.image import build as builder  # noqa: E402
from paddlecd.image import push as publish  # noqa: E402
from paddlecd.registry.embedded import RegistryServer, free_port  # noqa: E402


def blob_bytes(registry_root: Path) -> int:
    blobs = registry_root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def plain(settings, tag: str, *, no_cache: bool) -> tuple[float, list[str], dict[str, float]]:
    """docker build (DOCKER_BUILDKIT=1, the same CLI, secrets and args) + docker push; returns
    seconds, push lines and ``{"build": s, "push": s}``."""
    v = variants.get(settings, "cpu")
    entry = lock.check(settings, v)
    b = engine.pick_builder()
    start = time.perf_counter()
    with builder.secret_args(settings) as secrets:
        cmd = [
            *b.argv,
            "-q",
            "-f",
            str(ROOT / "images/Dockerfile"),
            "-t",
            tag,
            *secrets,
            "--build-arg",
            f"BASE={entry.pinned}",
            "--build-arg",  # this run's own cache records, as the toolkit side's (see run())
            f"CACHE_SCOPE={settings.build.cache_scope}",
            *(["--no-cache"] if no_cache else []),
            str(ROOT / "images"),
        ]
        subprocess.run(cmd, env={**os.environ, **dict(b.env)}, check=True, capture_output=True)
    built = time.perf_counter()
    out = subprocess.run(
        [b.argv[0], "push", tag], check=True, capture_output=True, text=True
    ).stdout
    end = time.perf_counter()
    return end - start, out.splitlines(), {"build": built - start, "push": end - built}


def toolkit(settings, *, no_cache: bool) -> tuple[float, list[str], dict[str, float]]:
    """paddlecd's build + push of the cpu variant; returns seconds, push lines and
    ``{"build": s, "push": s}``. The per-process caches (the builder probe, the engine client and
    its ping, the git revision) are emptied first: each ``invoke build push`` is a new process and
    pays them (they once hid 0.2 s of probing here, as the plain side had filled the cache)."""
    engine.pick_builder.cache_clear()
    engine.reset_client()
    git.revision.cache_clear()
    git.origin_url.cache_clear()
    lines: list[str] = []
    start = time.perf_counter()
    builder.build(settings, "cpu", no_cache=no_cache)
    built = time.perf_counter()
    publish.push(settings, "cpu", on_progress=lines.append)
    end = time.perf_counter()
    return end - start, lines, {"build": built - start, "push": end - built}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one round (what the test runs)")
    ap.add_argument("--base-from", metavar="HOST:PORT",
                    help="copy the cpu base from this plain-HTTP registry instead of pushing it")
    ap.add_argument("--profile", action="store_true", help="profile one cached build+push")
    ap.add_argument("--profile-cold", action="store_true",
                    help="profile one cold (--no-cache) build+push")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 1
        args.profile = args.profile_cold = True  # so the profile splits cannot rot either
    with tempfile.TemporaryDirectory(prefix="bench-build-push-") as tmp:
        server = RegistryServer(Path(tmp) / "registry", port=free_port()).start()
        try:
            run(args.rounds, server, Path(tmp) / "state", profile=args.profile,
                profile_cold=args.profile_cold, base_from=args.base_from, quick=args.quick)
        finally:
            server.stop()
            # remove the tags this run made (its registry's host), no one else's
            # one listing call (images.list() inspects each image and races a concurrent remove)
            for image in engine.client().api.images():
                for tag in image.get("RepoTags") or ():
                    if tag.startswith(f"{server.host}/"):
                        engine.remove_image(tag)


# Where paddlecd's own time goes, by the cumulative time of these functions under cProfile
# (module path suffix, function). The first two are the engine's work plain docker waits on too.
PARTS = {
    "build subprocess": [("paddlecd/proc.py", "_stream")],
    "push stream": [("paddlecd/engine.py", "decode_stream")],
    # build() runs the probe and the client's connect in threads (not profiled): what is left of
    # them is the wait for them
    "builder probe, engine client": [("paddlecd/engine.py", "pick_builder"),
                                     ("paddlecd/engine.py", "client"),
                                     ("concurrent/futures/thread.py", "shutdown")],
    "git (labels, tag)": [("paddlecd/git.py", "revision"), ("paddlecd/git.py", "origin_url")],
    "engine inspects": [("paddlecd/engine.py", "image_id"), ("paddlecd/engine.py", "image_exists")],
    "digest read-back": [("paddlecd/registry/client.py", "resolve")],
    "lock check": [("paddlecd/image/lock.py", "check")],
}
ENGINE_PARTS = ("build subprocess", "push stream")


def profile_once(settings, *, no_cache: bool) -> dict[str, float]:
    """One build+push (``no_cache``: cold) under cProfile; prints the 12 costliest calls by
    cumulative time and returns ``{"wall": s, "engine": s, "paddlecd": s, <PARTS name>: s}``, where
    "engine" is the time spent waiting on the builder subprocess and reading the engine's push
    stream (the work plain docker does too) and "paddlecd" the rest (probes, registry read-back,
    records). Profiler overhead lands in "paddlecd"."""
    return profiled(settings, no_cache=no_cache)[1]


def profiled(settings, *, no_cache: bool) -> tuple[tuple[float, list[str], dict[str, float]],
                                                    dict[str, float]]:
    """:func:`toolkit` under cProfile: its result and the split :func:`profile_once` returns."""
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    ran = toolkit(settings, no_cache=no_cache)
    prof.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(prof)

    def cumulative(module: str, function: str) -> float:
        return sum(
            row[3]
            for (path, _line, name), row in stats.stats.items()  # type: ignore[attr-defined]
            if name == function and path.endswith(module)
        )

    parts = {name: sum(cumulative(m, f) for m, f in funcs) for name, funcs in PARTS.items()}
    engine_s = sum(parts[name] for name in ENGINE_PARTS)
    stats.sort_stats("cumulative").print_stats(r"paddlecd|subprocess|docker", 12)
    return ran, {"wall": wall, "engine": engine_s, "paddlecd": wall - engine_s, **parts}


def print_split(mode: str, split: dict[str, float]) -> None:
    print(
        f"{mode} build+push profiled: {split['wall']:.3f} s wall, engine "
        f"{split['engine']:.3f} s, paddlecd {split['paddlecd']:.3f} s"
    )
    print("  " + ", ".join(f"{name} {split[name]:.3f} s" for name in PARTS))


def copy_base(settings, source: str) -> None:
    """The cpu base into ``settings``' registry from registry ``source`` (host:port, plain HTTP),
    blobs as they are, then pulled so the engine knows its digest there (no layer downloads) and
    pushed back (no uploads), so the engine knows its blobs are there: after a pull alone, the
    first push of an image built on the base gzips and uploads the 1.1 GB base layer again (the
    cold round's first push measured that, not a build's new layers; tests/support/base.py)."""
    target = variants.get(settings, "cpu").base
    origin = source + target[len(settings.registry.url):]
    subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                    "--dest-tls-verify=false", f"docker://{origin}", f"docker://{target}"],
                   check=True, capture_output=True)
    for verb in ("pull", "push"):
        subprocess.run(["docker", verb, "-q", target], check=True, capture_output=True)


def run(rounds: int, server: RegistryServer, state: Path, *, profile: bool = False,
        profile_cold: bool = False, base_from: str | None = None, quick: bool = False) -> None:
    """The benchmark's rounds, the no-op rebuild and the profiles asked for, printed. ``quick``:
    the profiles are of the round's own paddlecd runs (one cold and one cached build fewer;
    the profiler's overhead is then in those runs' figures, which quick mode is not for)."""
    # A scope of this run's own: its --no-cache builds register new layers under the cache keys
    # they build, and a cached build elsewhere on the daemon (a test's, a user's) must not pick
    # those up; nor must this run's cached side reuse layers that others built.
    flags = {"registry.url": server.host, "state_dir": str(state),
             "build.cache_scope": f"bench-{uuid.uuid4().hex[:12]}"}
    base = config.load(flags, root=ROOT)
    settings = config.load({**flags, "registry.repository": "bench/toolkit"}, root=ROOT)
    if base_from:
        copy_base(base, base_from)
    bootstrap.bootstrap(base, "cpu")  # into this registry unless copied; locked in <state>
    lock.lock(base, ["cpu"])
    plain_tag = f"{base.registry.url}/bench/plain:cpu"
    rows, phases, runs, splits = {}, {}, {}, {}
    for mode, no_cache in (("cold", True), ("cached", False)):
        t_plain, t_tool, p_plain, p_tool = [], [], [], []
        for i in range(rounds):
            # alternate which side goes first, so neither always meets the other's leftovers
            # (page cache, the daemon's GC, the registry's fresh blobs)
            order = ("plain", "tool") if i % 2 == 0 else ("tool", "plain")
            for side in order:
                if side == "plain":
                    t, _, ph = plain(base, plain_tag, no_cache=no_cache)
                    t_plain.append(t)
                    p_plain.append(ph)
                elif quick and (profile_cold if no_cache else profile):
                    (t, _, ph), split = profiled(settings, no_cache=no_cache)
                    splits[mode] = split
                    t_tool.append(t)
                    p_tool.append(ph)
                else:
                    t, _, ph = toolkit(settings, no_cache=no_cache)
                    t_tool.append(t)
                    p_tool.append(ph)
        rows[mode] = (statistics.median(t_plain), statistics.median(t_tool))
        runs[mode] = {"plain": t_plain, "paddlecd": t_tool}
        phases[mode] = {
            side: {k: statistics.median(ph[k] for ph in p) for k in ("build", "push")}
            for side, p in (("plain", p_plain), ("paddlecd", p_tool))
        }
    before = blob_bytes(server.root)
    _, lines, _ = toolkit(settings, no_cache=False)
    noop_bytes = blob_bytes(server.root) - before
    pushed = sum(1 for ln in lines if ln.endswith(" Pushed"))
    existing = sum(1 for ln in lines if "Layer already exists" in ln)
    print(f"{'mode':8} {'plain docker (s)':>17} {'paddlecd (s)':>13} {'ratio':>7}")
    for mode, (p, t) in rows.items():
        print(f"{mode:8} {p:17.2f} {t:13.2f} {t / p:7.3f}")
    for mode, ph in phases.items():
        print(
            f"  {mode} phases (medians): build {ph['plain']['build']:.2f} / "
            f"{ph['paddlecd']['build']:.2f} s, push {ph['plain']['push']:.2f} / "
            f"{ph['paddlecd']['push']:.2f} s (plain / paddlecd); runs plain "
            + ", ".join(f"{t:.2f}" for t in runs[mode]["plain"])
            + "; paddlecd "
            + ", ".join(f"{t:.2f}" for t in runs[mode]["paddlecd"])
        )
    print(
        f"no-op rebuild+push: {noop_bytes} bytes added to the registry; layers pushed {pushed}, "
        f"already present {existing}"
    )
    doc = {"rounds": rounds, "median_seconds": rows, "phases_median_seconds": phases,
           "runs_seconds": runs, "noop_bytes": noop_bytes, "noop_layers_pushed": pushed}
    if profile:
        split = splits.get("cached") or profile_once(settings, no_cache=False)
        print_split("cached", split)
        doc["profile_seconds"] = split
    if profile_cold:
        split = splits.get("cold") or profile_once(settings, no_cache=True)
        print_split("cold", split)
        doc["profile_cold_seconds"] = split
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
