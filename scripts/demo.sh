#!/usr/bin/env bash
# README command 1: the whole pipeline on the embedded default, on one Debian/Ubuntu machine.
#   1. install/start what is missing: Docker engine, CNCF distribution registry on 127.0.0.1:5000, .venv
#   2. bootstrap the CPU Paddle base into that registry if it lacks it, and lock it
#   3. invoke build push verify --variant cpu          (evidence under .paddlecd/evidence/, and a
#      signed attestation attached to the digest in the registry; the key pair is made on first
#      run under .paddlecd/keys and trusted for this demo)
#   4. promote the verified digest to a pre-release     (0.1.0-demo.d<digest>, idempotent per
#      digest; promotion checks the registry's attestation and copies it to the release repository)
#   5. deploy it: 2 containers train examples/train_linear.py with gloo (--cluster local)
#   6. upload the trained jit.save export to the file:// store under .paddlecd/artifacts
# Re-running is fast (every step is cached or idempotent) and safe. Never prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/stack.sh up
INV=.venv/bin/invoke
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# The embedded default signs too (issue 10): a key pair made once per machine, trusted by this
# demo only (a real project commits its public key and lists it in release.trusted_keys).
if [ ! -f .paddlecd/keys/paddlecd-signing.key ]; then
  step "attestation signing key (first run)"
  $INV evidence.keygen --out .paddlecd/keys
fi
export PADDLECD_VERIFY_SIGNING_KEY=.paddlecd/keys/paddlecd-signing.key
export PADDLECD_RELEASE_TRUSTED_KEYS=.paddlecd/keys/paddlecd-signing.pub

step "base image (bootstrapped once, then cached in the registry)"
$INV image.bootstrap --variant cpu

step "build push verify (cpu)"
$INV build push verify --variant cpu

DIGEST=$(.venv/bin/python -c 'import json;print(json.load(open(".paddlecd/candidates/cpu.json"))["digest"])')
VERSION="0.1.0-demo.d${DIGEST:7:12}"
step "promote $DIGEST as $VERSION"
$INV promote --variant cpu --version "$VERSION" --yes

step "deploy release $VERSION-cpu: 2-node gloo training in local containers"
rm -rf .paddlecd/train-output
$INV deploy --release "$VERSION-cpu" --job examples/train.yaml --nodes 2 --cluster local

step "upload the trained model"
# the demo retrains on every run, so it replaces the model of this version (--overwrite)
$INV upload --model-dir .paddlecd/train-output/model --name linear-demo --version "$VERSION" \
  --image "$(.venv/bin/python -c 'import json;print(json.load(open(".paddlecd/candidates/cpu.json"))["reference"])')" \
  --overwrite

step "done"
echo "evidence:   .paddlecd/evidence/${DIGEST:7}.json"
echo "attestation: PADDLECD_RELEASE_TRUSTED_KEYS=.paddlecd/keys invoke evidence.show $VERSION-cpu"
echo "release:    invoke release.show $VERSION"
echo "artifacts:  invoke artifacts.list linear-demo"
