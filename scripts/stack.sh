#!/usr/bin/env bash
# Install and start what paddlecd needs on a Debian/Ubuntu machine, idempotently:
#   up        apt packages (docker.io, docker-registry, debootstrap, skopeo, openssl), dockerd, the
#             project venv (.venv with paddlecd[test]) and the embedded registry on 127.0.0.1:5000
#   engine    the packages, dockerd, the venv, the node packages, Ceph and podman (what the tests
#             need; they start their own registries, RGW and podman service)
#   rgw       only Ceph's mon, OSD and RADOS Gateway (the suite's S3 server, tests/support/rgw.py)
#   podman    only podman, netavark and aardvark-dns (its API service is started by the tests,
#             tests/support/podman.py; by users: docs/guides/podman.md)
#   venv      only the project venv (what the unit tier needs: no services)
#   node      only the npm packages the tests' independent Sigstore reader needs (node_modules in
#             $PADDLECD_NODE_DIR, default .paddlecd/node: gitignored, outside the package)
#   down      stop the embedded registry (dockerd is left running)
#   gc        distribution's `registry garbage-collect` on the embedded registry's storage: frees
#             the blobs of manifests deleted (invoke release.prune); stops and restarts the
#             registry around it (distribution wants no writes meanwhile)
# Needs root (or sudo) for apt and dockerd. Never prompts (CI=true, no stdin).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STATE=${PADDLECD_STATE_DIR:-$ROOT/.paddlecd}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
source scripts/terminal.sh
log() { bold "[stack]" " $*"; }

# The apt packages each part lacks (checked by command, so a machine that has them asks for none),
# one name per line.
base_packages() {
  command -v dockerd >/dev/null || echo docker.io
  command -v docker-registry >/dev/null || echo docker-registry
  command -v debootstrap >/dev/null || echo debootstrap
  command -v skopeo >/dev/null || echo skopeo
  command -v openssl >/dev/null || echo openssl
  python3 -c 'import venv, ensurepip' 2>/dev/null || echo python3-venv
}
# Ceph RGW for the storage tests: one mon + a memstore OSD + radosgw, started by the suite itself.
ceph_packages() {
  command -v ceph-mon >/dev/null || echo ceph-mon
  command -v ceph-osd >/dev/null || echo ceph-osd
  command -v radosgw >/dev/null || echo radosgw
}
# podman as the engine (its Docker-compatible API service); netavark + aardvark-dns give its
# networks DNS names (the local cluster's rank aliases).
podman_packages() {
  command -v podman >/dev/null || echo podman
  command -v netavark >/dev/null || [ -x /usr/lib/podman/netavark ] || echo netavark
  command -v aardvark-dns >/dev/null || [ -x /usr/lib/podman/aardvark-dns ] || echo aardvark-dns
}
node_packages() { { command -v node && command -v npm; } >/dev/null || echo nodejs npm; }

# apt_install PKG...: one index update and one install, without recommends, never prompting;
# waits up to 5 minutes for another apt run's lock. Nothing to do without arguments.
apt_install() {
  [ $# -gt 0 ] || return 0
  log "installing $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
    --no-install-recommends "$@" >/dev/null
}
install_packages() { apt_install $(base_packages); }
install_ceph() { apt_install $(ceph_packages); }
install_podman() { apt_install $(podman_packages); }

# What the tests need (.ci/run): every apt package in one update and one install, while the venv
# and the npm packages download beside it (PyPI and npm; each waits for apt only when apt brings
# what it runs on: python3-venv, node). On a fresh machine the three in a row took ~67 s.
engine_tier() {
  local background=()
  if python3 -c 'import venv, ensurepip' 2>/dev/null; then make_venv & background+=($!); fi
  if command -v node >/dev/null && command -v npm >/dev/null; then
    { mkdir -p "$STATE"; install_node; } & background+=($!)
  fi
  apt_install $(base_packages; ceph_packages; podman_packages; node_packages)
  start_dockerd
  local pid
  for pid in "${background[@]}"; do wait "$pid"; done  # set -e: a failed one stops the tier here
  make_venv  # no-ops when done above; else now that apt brought python3-venv or node
  mkdir -p "$STATE"
  install_node
}

start_dockerd() {
  if docker_ok; then log "docker engine already running"; return; fi
  log "starting dockerd (log: /var/log/paddlecd-dockerd.log)"
  $SUDO sh -c 'nohup dockerd >/var/log/paddlecd-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker_ok && { log "docker engine ready"; return; }; sleep 1; done
  log "dockerd did not come up; last log lines:"; tail -20 /var/log/paddlecd-dockerd.log; exit 1
}

docker_ok() { [ -S /var/run/docker.sock ] && python3 - <<'PY' 2>/dev/null
import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("/var/run/docker.sock")
s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n"); assert b"OK" in s.recv(1024)
PY
}

make_venv() {
  local uv=0.13.9  # the installer of the venv (PyPI uv), pinned like every dependency
  mkdir -p "$STATE"
  # .venv/.installed holds the sha256 of the pyproject.toml installed: a checkout, a branch switch
  # or a new worktree rewrites the file's mtime without changing it, and must not reinstall
  local want; want=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ ! -x .venv/bin/invoke ] || [ "$(cat .venv/.installed 2>/dev/null)" != "$want" ]; then
    log "installing paddlecd into .venv"
    python3 -m venv .venv
    # uv resolves and downloads in parallel: ~20 s here where pip took 80-100 s (same packages)
    { .venv/bin/pip install -q "uv==$uv" &&
      .venv/bin/uv pip install -q --python .venv/bin/python -e '.[test]'; } >"$STATE/pip-install.log" 2>&1 ||
      { cat "$STATE/pip-install.log"; exit 1; }
    echo "$want" >.venv/.installed
  fi
}

# The tests' independent reader of paddlecd's Sigstore bundles (tests/support/sigstore_verify.mjs).
# Pinned; @sigstore/verify declares node >= 22 but runs on Debian's node 20 (EBADENGINE warning only).
NODE_DIR=${PADDLECD_NODE_DIR:-$ROOT/.paddlecd/node}
NPM_PACKAGES=(@sigstore/verify@4.1.3 @sigstore/bundle@5.0.1 @sigstore/core@4.0.1 @sigstore/protobuf-specs@0.5.2)
install_node() {
  apt_install $(node_packages)
  local want="${NPM_PACKAGES[*]}"
  if [ "$(cat "$NODE_DIR/.installed" 2>/dev/null)" = "$want" ]; then return; fi
  log "installing ${NPM_PACKAGES[*]} into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  [ -f "$NODE_DIR/package.json" ] || echo '{"name":"paddlecd-test-readers","private":true}' >"$NODE_DIR/package.json"
  npm install --prefix "$NODE_DIR" --save-exact --no-audit --no-fund --ignore-scripts --yes \
    --engine-strict=false --loglevel=error "${NPM_PACKAGES[@]}" >"$STATE/npm-install.log" 2>&1 \
    || { cat "$STATE/npm-install.log"; exit 1; }
  echo "$want" >"$NODE_DIR/.installed"
}

start_registry() {
  mkdir -p "$STATE/registry"
  if .venv/bin/python -c 'import requests,sys; sys.exit(requests.get("http://127.0.0.1:5000/v2/",timeout=2).status_code!=200)' 2>/dev/null; then
    log "registry already answering on 127.0.0.1:5000"; return
  fi
  log "starting the embedded registry on 127.0.0.1:5000 (data: $STATE/registry)"
  # The daemon keeps none of its caller's descriptors: under `flock /work/port5000.lock demo.sh`
  # it inherited the lock's fd and held the lock until `stack.sh down` (flock(1), --close).
  ( for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec nohup .venv/bin/python -m paddlecd.registry.embedded --port 5000 --root "$STATE/registry" \
      >"$STATE/registry/serve.log" 2>&1 ) &
  echo $! >"$STATE/registry/pid"
  for _ in $(seq 30); do
    .venv/bin/python -c 'import requests; requests.get("http://127.0.0.1:5000/v2/",timeout=2)' 2>/dev/null && return
    sleep 1
  done
  log "registry did not start:"; cat "$STATE/registry/serve.log"; exit 1
}

registry_pid() {  # the supervisor's pid when the embedded registry this script started runs
  [ -f "$STATE/registry/pid" ] && kill -0 "$(cat "$STATE/registry/pid")" 2>/dev/null && cat "$STATE/registry/pid"
}

gc_registry() {
  local config="$STATE/registry/config.yml" pid="" before after
  [ -f "$config" ] || { log "no embedded registry at $STATE/registry: run scripts/stack.sh up"; exit 1; }
  if pid=$(registry_pid); then
    log "stopping the embedded registry for garbage collection"
    kill "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  before=$(du -sb "$STATE/registry/data" | cut -f1)
  # no --delete-untagged: referrers and index children are manifests no tag names
  "${PADDLECD_REGISTRY_SERVER:-docker-registry}" garbage-collect "$config" >"$STATE/registry/gc.log" 2>&1 \
    || { log "garbage-collect failed:"; cat "$STATE/registry/gc.log"; exit 1; }
  after=$(du -sb "$STATE/registry/data" | cut -f1)
  log "garbage-collect freed $((before - after)) bytes (log: $STATE/registry/gc.log)"
  if [ -n "$pid" ]; then start_registry; fi
}

# an empty command is refused, never taken for the default "up" (a trial: stack.sh '' ran up)
if [ $# -gt 1 ]; then  # a trial: `stack.sh up extra` ran `up`, the rest unsaid
  echo "stack.sh takes one command, not '$*'; usage: $0 [up|engine|rgw|podman|venv|node|down|gc]" >&2
  exit 2
fi
case "${1-up}" in
  up) install_packages; start_dockerd; make_venv; start_registry ;;
  engine) engine_tier ;;
  rgw) install_ceph ;;
  podman) install_podman ;;
  venv)
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    make_venv ;;
  node) mkdir -p "$STATE"; install_node ;;
  down) [ -f "$STATE/registry/pid" ] && kill "$(cat "$STATE/registry/pid")" 2>/dev/null || true ;;
  gc) gc_registry ;;
  *) echo "usage: $0 [up|engine|rgw|podman|venv|node|down|gc]" >&2; exit 2 ;;
esac
