#!/usr/bin/env bash
# README command 1: the whole pipeline on the embedded default, on one Debian/Ubuntu machine.
#   1. install/start what is missing: Docker engine, CNCF distribution registry on 127.0.0.1:5000, .venv
#   2. bootstrap the CPU Paddle base into that registry if it lacks it, and lock it
#   3. invoke build, push --json, verify --json (cpu) (evidence under .paddlecd/evidence/, and a
#      signed attestation attached to the digest in the registry; the key pair is made on first
#      run under .paddlecd/keys and trusted for this demo)
#   4. promote the verified digest to a pre-release     (0.1.0-demo.d<digest>, idempotent per
#      digest; promotion checks the registry's attestation and copies it to the release repository)
#   5. deploy it: 2 containers train examples/train_linear.py with gloo (--cluster local)
#   6. upload the trained jit.save export to the file:// store under .paddlecd/artifacts
#   7. write the Kyverno admission policy that admits only verified, signed releases
# Each step's result (reference, digest, release, model folder) comes from the task's --json
# document on stdout (issue 12), never from paddlecd's state files.
# Re-running is fast (every step is cached or idempotent) and safe. Never prompts.
# On a terminal each task shows one live line per stage that collapses into its result (about 30
# lines for a fresh run, 25 for a re-run); every tool's full output is in .paddlecd/logs/.
# PADDLECD_VERBOSE=1 streams it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/stack.sh up
INV=.venv/bin/invoke
step() { printf '\033[1m==> %s\033[0m\n' "$*"; }
# field KEY: one key of the JSON document on stdin (a task's --json result); no jq needed
field() { .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# The embedded default signs too: a key pair made once per machine in .paddlecd/keys, which
# verify signs with and promote trusts while no key is configured, so the commands after the demo
# need no exports (a real project commits its public key and lists it in release.trusted_keys).
if [ ! -f .paddlecd/keys/paddlecd-signing.key ]; then
  step "attestation signing key (first run)"
  $INV evidence.keygen >/dev/null
  echo "key pair in .paddlecd/keys: verify signs with it, promote trusts it"
fi

step "base image (bootstrapped once, then cached in the registry)"
# its lines: the base pushed (or "already in the registry") and the per-machine pin; the pin's
# line is left out here (it is in .paddlecd/lock.local.yaml)
$INV image.bootstrap --variant cpu | grep -v '^locked '

step "build push verify (cpu)"
# each task's result is read from its --json document on stdout (issue 12); progress is on stderr
$INV build --variant cpu >/dev/null  # its result line on stderr names the image; stdout repeats it
PUSHED=$($INV push --variant cpu --json)
REFERENCE=$(field reference <<<"$PUSHED")
EVIDENCE=$($INV verify --variant cpu --json)
DIGEST=$(field digest <<<"$EVIDENCE")
if [ "$DIGEST" != "$(field digest <<<"$PUSHED")" ]; then
  echo "verify ran $DIGEST, but push made $REFERENCE" >&2
  exit 1
fi
echo "verified ${REFERENCE%@*}@${DIGEST:0:19}…: passed=$(field passed <<<"$EVIDENCE")"

VERSION="0.1.0-demo.d${DIGEST:7:12}"
step "promote ${DIGEST:0:19}… as $VERSION"
PROMOTED=$($INV promote --variant cpu --version "$VERSION" --digest "$DIGEST" --yes --json)
RELEASE=$(field release <<<"$PROMOTED")
echo "promoted $RELEASE ($(field bytes_uploaded <<<"$PROMOTED") bytes uploaded," \
  "ledger record $(field record <<<"$PROMOTED" | cut -c1-24)…)"

step "deploy release $RELEASE: 2-node gloo training in local containers"
rm -rf .paddlecd/train-output
DEPLOYED=$($INV deploy --release "$RELEASE" --job examples/train.yaml --nodes 2 --cluster local \
  --json)
MODEL=$(field model <<<"$DEPLOYED")
echo "job $(field job_id <<<"$DEPLOYED") wrote its model to ${MODEL#"$PWD"/}"

step "upload the trained model"
# the demo retrains on every run, so it replaces the model of this version (--overwrite)
UPLOADED=$($INV upload --model-dir "$MODEL" --name linear-demo --version "$VERSION" \
  --image "$REFERENCE" --overwrite --json)
URL=$(field url <<<"$UPLOADED")
MANIFEST=$(field manifest_digest <<<"$UPLOADED")
echo "uploaded ${URL#"file://$PWD"/} (manifest ${MANIFEST:0:19}…)"

step "admission policy: a cluster that runs only verified releases (Kyverno)"
$INV release.policy --out .paddlecd/admission-policy.yaml 2>&1 | sed 's/ for .*//'

step "done: what was made, and the next commands to try (or source .venv/bin/activate first)"
echo "evidence:    .paddlecd/evidence/${DIGEST:7}.json"
echo "attestation: .venv/bin/invoke evidence.show $VERSION-cpu"
echo "release:     .venv/bin/invoke release.show $VERSION   ($RELEASE)"
echo "artifacts:   .venv/bin/invoke artifacts.list linear-demo"
echo "policy:      kubectl apply -f .paddlecd/admission-policy.yaml   (Kyverno >= 1.13)"
