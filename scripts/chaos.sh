#!/usr/bin/env bash
# The long chaos run, for before a release: N seeds of `rozone-chaos` for DURATION each,
# one after another, then the decoder fuzzing with a long budget. Failed seeds keep their
# history, summary and daemon logs under OUT/seed-N.
#
#   scripts/chaos.sh                 100 seeds x 60s, fuzz 1,000,000 inputs per decoder
#   scripts/chaos.sh 20 30s          20 seeds x 30s
#   FIRST=500 scripts/chaos.sh 10    seeds 500..509
#   FUZZ_ITERS=0 scripts/chaos.sh    no fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=${1:-100}
duration=${2:-60s}
first=${FIRST:-1}
out=${OUT:-chaos-out}
fuzz_iters=${FUZZ_ITERS:-1000000}

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}
if command -v ccache >/dev/null 2>&1; then
    export CC="ccache gcc" CXX="ccache g++"
fi

# Failpoints compiled in: the disk faults set `dn-disk-fault` in running datanodes (docs/chaos.md).
cargo build --release -p rozone-scm -p rozone-om -p rozone-datanode -p rozone-chaos --bins \
    --features rozone-datanode/failpoints,rozone-raft/failpoints
bin="$CARGO_TARGET_DIR/release/rozone-chaos"
mkdir -p "$out"

passed=0
failed=()
for ((s = first; s < first + seeds; s++)); do
    echo "== seed $s ($duration)"
    if "$bin" --seed "$s" --duration "$duration" --out "$out/seed-$s" | tee "$out/seed-$s.txt"; then
        passed=$((passed + 1))
    else
        failed+=("$s")
    fi
done

echo "== per-seed summaries in $out/seed-*.txt"
grep -h '^checked\|^verdict' "$out"/seed-*.txt | sort | uniq -c | sort -rn | head -20 || true
echo "== $passed of $seeds seeds passed"
if ((${#failed[@]})); then
    echo "FAILED seeds: ${failed[*]} (history and logs in $out/seed-N/)"
fi

if ((fuzz_iters > 0)); then
    echo "== fuzzing, $fuzz_iters inputs per decoder"
    ROZONE_FUZZ_ITERS=$fuzz_iters cargo test --release -p rozone-chaos --test fuzz_decoders -- --nocapture
fi
((${#failed[@]} == 0))
