#!/usr/bin/env bash
# The key-write gap after an SCM leader is SIGKILLed, on the local cluster (issue 12, item 7):
# time from the kill to the first key put that succeeds, median of the runs.
#
#   scripts/bench-scm-failover.sh              3 runs (default), builds the release binaries
#   options: --runs N  --no-build (use the binaries as they are)  --keep (keep the dir)
#            --dev (the dev profile's binaries, target/debug: optimized too, built by the tests)
#
# Each run: `rozone dev up --detach` (the first initialises 3 SCM, 3 OM, 3 datanodes; later
# runs restart it from its data: a cold start, so safe mode is left before the run), one
# 64 KiB warm-up put, the SCM leader (`rozone admin scm roles`) SIGKILLed, then 64 KiB puts
# with `rozone sh key put` (the CLI's ordinary retries) back to back until one succeeds;
# then `rozone dev down`. Prints one line per run and the median; needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3 build=true keep=false profile=release
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --no-build) build=false; shift ;;
    --keep) keep=true; shift ;;
    --dev) profile=debug; shift ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-scm-failover: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
command -v jq >/dev/null || { echo "bench-scm-failover: needs jq (apt-get install jq)" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
if $build; then
    if [ "$profile" = release ]; then cargo build --release --workspace --bins; else cargo build --workspace --bins; fi
fi
rz="$CARGO_TARGET_DIR/$profile/rozone"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rozone-scm-failover.XXXXXX")
cleanup() {
    "$rz" dev down --dir "$dir" >/dev/null 2>&1 || true
    $keep || rm -rf "$dir"
}
trap cleanup EXIT
export ROZONE_CONFIG="$dir/client.toml"
head -c 65536 /dev/urandom >"$dir/payload"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
gaps=()
for run in $(seq 1 "$runs"); do
    "$rz" dev up --detach --dir "$dir" >/dev/null
    "$rz" sh volume create /bench >/dev/null 2>&1 || true
    "$rz" sh bucket create /bench/bkt >/dev/null 2>&1 || true
    "$rz" sh key put "/bench/bkt/warm-$run" "$dir/payload" >/dev/null
    leader=$("$rz" --json admin scm roles | jq -r '.leader_id')
    pid=$(jq -r --arg n "scm$leader" '.[] | select(.name == $n) | .pid' "$dir/pids.json")
    [ -n "$pid" ] && [ "$pid" != null ] || { echo "no pid for scm$leader" >&2; exit 1; }
    t0=$(now_ms)
    kill -KILL "$pid"
    failed=0
    until "$rz" sh key put "/bench/bkt/run$run-$failed" "$dir/payload" >/dev/null 2>"$dir/err"; do
        failed=$((failed + 1))
        if [ $(($(now_ms) - t0)) -gt 120000 ]; then
            echo "run $run: no put succeeded in 120 s: $(cat "$dir/err")" >&2
            exit 1
        fi
    done
    gap=$(($(now_ms) - t0))
    echo "run $run: SCM leader scm$leader killed; first key put succeeded after $gap ms ($failed failed puts before it)"
    gaps+=("$gap")
    "$rz" dev down --dir "$dir" >/dev/null
done
median=$(printf '%s\n' "${gaps[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2] + a[NR/2+1]) / 2)}')
echo "write gap after an SCM leader kill: median $median ms of $runs runs (${gaps[*]} ms)"
