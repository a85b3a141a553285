#!/usr/bin/env bash
# The README's test command under load: `bash .ci/test` N times in a row with two busy loops
# beside it (as `stress -c 2` would), each run's pass/fail and wall time printed, the loops
# stopped at the end (or on Ctrl-C). Not run by CI: it takes N full suites.
# Usage: bash bench/suite_under_load.sh [N=3] [extra pytest args...]   (from anywhere)
# Each run's output is kept in $OUT (default /tmp/kvwatch-suite-under-load/run-K.log).
set -u
cd "$(dirname "$0")/.."
N=${1:-3}
shift $(( $# > 0 ? 1 : 0 ))
OUT=${OUT:-/tmp/kvwatch-suite-under-load}
mkdir -p "$OUT"

loops=()
stop_loops() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${loops[@]}"; do wait "$pid" 2>/dev/null; done
  loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
  python3 -c 'while True: pass' &
  loops+=($!)
done
echo "busy loops: ${loops[*]}; $(nproc) cores; $N runs of bash .ci/test $*"

failed=0
for k in $(seq 1 "$N"); do
  log="$OUT/run-$k.log"
  t0=$(date +%s)
  bash .ci/test "$@" >"$log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - t0 ))
  summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed).* in [0-9.]+s' "$log" | tail -n1)
  if [ "$rc" -eq 0 ]; then verdict=PASS; else verdict="FAIL (exit $rc)"; failed=$((failed + 1)); fi
  printf 'run %d: %s in %dm%02ds  %s  (%s)\n' "$k" "$verdict" $((wall / 60)) $((wall % 60)) "$summary" "$log"
  [ "$rc" -eq 0 ] || grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
done
echo "$((N - failed)) of $N runs green"
[ "$failed" -eq 0 ]
