#!/usr/bin/env bash
# The README's test command: start the engine (and install what is missing), then run the whole suite
# (unit + integration against the real engine, registry and S3 server) with pytest-xdist.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/stack.sh engine
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
