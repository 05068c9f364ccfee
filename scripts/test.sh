#!/usr/bin/env bash
# The README's test command. Tiers:
#   scripts/test.sh              the whole suite (unit + integration against the real engine,
#                                registries and S3 servers the tests start), pytest-xdist on 3
#                                workers, the 25 slowest tests listed at the end
#   scripts/test.sh --unit       the unit tier only: no services (pytest -m "not integration");
#                                the venv and the npm packages of the tests' Sigstore reader
#   scripts/test.sh --repeat N   the integration tier N times, each in a new random order
#                                (pytest-randomly, a new seed a round); prints every test that
#                                ever failed, with its rounds and seeds; exit 1 if one did
# Further arguments go to pytest. Installs what is missing first (scripts/stack.sh). Never prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
# Workers: 2 for the unit tier (CPU-bound: one per core), 3 where integration tests run: a third
# fills the seconds the others wait on containers, registries and the network (a fresh clone,
# same VM: the whole suite 547 s of tests on 2 workers, 514 s on 3). PYTEST_WORKERS overrides.
pytest_on() { PYTEST=(.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-$1}" --dist loadgroup); }
# Compiled bytecode is kept, outside the checkout: with PYTHONDONTWRITEBYTECODE=1 (set on this VM)
# every test process, CLI run and subprocess compiled each module it imported from source again,
# ~15% of the unit tier's CPU. The prefix keeps __pycache__ folders out of the tree as that does.
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/paddlecd/pycache}
unset PYTHONDONTWRITEBYTECODE

case "${1:-}" in
  --unit)
    shift
    bash scripts/stack.sh venv
    bash scripts/stack.sh node  # the unit tier reads Sigstore bundles with sigstore-js too
    pytest_on 2
    exec "${PYTEST[@]}" -p no:randomly -m "not integration" "$@"
    ;;
  --repeat)
    rounds=${2:?usage: scripts/test.sh --repeat N [pytest args]}
    [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "--repeat N: N must be a whole number >= 1, not '$rounds'" >&2; exit 2; }
    shift 2
    bash scripts/stack.sh engine
    pytest_on 3
    logs=$(mktemp -d "${TMPDIR:-/tmp}/paddlecd-repeat.XXXXXX")
    for round in $(seq "$rounds"); do
      seed=$(( (RANDOM << 15 | RANDOM) + round ))
      echo "== round $round/$rounds: integration tier, pytest-randomly seed $seed (log: $logs/$round.log)"
      set +e
      "${PYTEST[@]}" --randomly-seed="$seed" --randomly-dont-reset-seed \
        -m integration -q -rfE "$@" >"$logs/$round.log" 2>&1
      code=$?
      set -e
      tail -n 1 "$logs/$round.log"
      grep -E '^(FAILED|ERROR) ' "$logs/$round.log" | sed "s/\$/  [round $round, seed $seed]/" \
        >>"$logs/failed.txt" || true
      [ "$code" -eq 0 ] || [ -s "$logs/failed.txt" ] ||
        echo "FAILED round $round: pytest exited $code  [round $round, seed $seed]" >>"$logs/failed.txt"
    done
    if [ -s "$logs/failed.txt" ]; then
      echo "== failed in $rounds rounds (re-run one order with -p randomly --randomly-seed=SEED):"
      sort "$logs/failed.txt"
      exit 1
    fi
    echo "== no test failed in $rounds shuffled rounds"
    ;;
  *)
    bash scripts/stack.sh engine
    pytest_on 3
    exec "${PYTEST[@]}" -p no:randomly --durations=25 "$@"
    ;;
esac
