#!/usr/bin/env bash
# Profiles a dev cluster under one `rozone bench` workload with perf: where the CPU of
# every daemon and of the bench client goes. Uses the `profiling` cargo profile (release
# code, not stripped, line tables for our crates; Cargo.toml says why it costs no second
# RocksDB build).
#
#   scripts/profile.sh [options] -- BENCH ARGS...     e.g. -- om-keys -c 64 -d 12s
#   options: --no-build          use $CARGO_TARGET_DIR/profiling as it is
#            --bin-dir DIR       use the binaries in DIR (no build)
#            --prepare "ARGS"    a `rozone bench` run before the profiled one (data for gets)
#            --delay S           seconds into the workload before recording (default 4)
#            --duration S        seconds recorded (default 5)
#            --freq HZ           samples per second per CPU (default 499)
#            --graph             record call graphs (DWARF unwinding; large perf.data)
#            --out DIR           where perf.data and the reports go (default a temp dir)
#
# Records every CPU (perf record -a), so the bench client, all nine daemons and anything
# else running are in one profile; the reports split it by process (pids.json names) and
# list the top symbols overall and of each daemon process. Needs perf (Debian's
# linux-perf); on a VM without hardware counters perf samples the cpu-clock.
set -euo pipefail
cd "$(dirname "$0")/.."

build=true bin= prepare= delay=4 duration=5 freq=499 graph=false out=
while [ $# -gt 0 ]; do
    case $1 in
    --no-build) build=false; shift ;;
    --bin-dir) bin=${2:?--bin-dir needs a directory}; build=false; shift 2 ;;
    --prepare) prepare=${2:?--prepare needs bench arguments}; shift 2 ;;
    --delay) delay=${2:?--delay needs seconds}; shift 2 ;;
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --freq) freq=${2:?--freq needs a rate}; shift 2 ;;
    --graph) graph=true; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "profile: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "profile: give the workload after --, e.g. -- om-keys -c 64 -d 12s" >&2; exit 2; }
for v in "$delay" "$duration" "$freq"; do
    case $v in '' | *[!0-9]*) echo "profile: --delay, --duration and --freq want whole numbers" >&2; exit 2 ;; esac
done
command -v perf >/dev/null || { echo "profile: perf is missing: apt-get install linux-perf" >&2; exit 1; }
command -v jq >/dev/null || { echo "profile: jq is missing: apt-get install jq" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}
command -v ccache >/dev/null && export CC="ccache gcc" CXX="ccache g++"
bin=${bin:-$CARGO_TARGET_DIR/profiling}
if $build; then
    cargo build --profile profiling --workspace --bins >&2
fi
[ -x "$bin/rozone" ] || { echo "profile: no $bin/rozone: run without --no-build" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rozone-profile.XXXXXX")
out=${out:-$work/out}
mkdir -p "$out"
rz_dir=$work/cluster
cleanup() {
    local rc=$?
    set +e
    [ -f "$rz_dir/pids.json" ] && "$bin/rozone" dev down --dir "$rz_dir" >/dev/null 2>&1
    rm -rf "$rz_dir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rz() { "$bin/rozone" "$@"; }
rz --json dev up --detach --dir "$rz_dir" --bin-dir "$bin" >"$out/dev-up.json" ||
    { echo "profile: rozone dev up failed: see $rz_dir/*/stderr.log" >&2; exit 1; }
export ROZONE_CONFIG=$rz_dir/client.toml
if [ -n "$prepare" ]; then
    # shellcheck disable=SC2086 # the prepare run's arguments are words
    rz --json bench $prepare >"$out/prepare.json"
fi

"$bin/rozone" --json bench "$@" >"$out/bench.json" &
bench_pid=$!
sleep "$delay"
flags=(-a -F "$freq" -o "$out/perf.data")
$graph && flags+=(--call-graph dwarf,16384)
perf record "${flags[@]}" -- sleep "$duration" 2>"$out/perf-record.log"
wait "$bench_pid"

# Process names: the dev cluster's daemons by pids.json, the rest as perf saw them.
jq -r '.[] | "\(.pid) \(.name)"' "$rz_dir/pids.json" >"$out/pids.txt"
echo "$bench_pid bench-client" >>"$out/pids.txt"
report() { perf report -i "$out/perf.data" --stdio --no-children -g none "$@" 2>/dev/null; }
{
    echo "# share of all samples by process (pids.json names; others by their command)"
    perf script -i "$out/perf.data" -F pid,comm 2>/dev/null |
        awk -v names="$out/pids.txt" '
            BEGIN { while ((getline l < names) > 0) { split(l, f, " "); name[f[1]] = f[2] } }
            { pid = $NF; n[pid]++; total++; if (!(pid in cmd)) { $NF = ""; cmd[pid] = $0 } }
            END { for (p in n) if (100 * n[p] / total >= 0.5)
                printf "%7.1f%%  %s\n", 100 * n[p] / total, (p in name) ? name[p] : (p == 0 ? "idle" : cmd[p] "(" p ")") }' |
        sort -rn
} >"$out/by-process.txt"
report --sort dso,sym --percent-limit 0.4 >"$out/top-symbols.txt"
while read -r pid name; do
    report --pid "$pid" --sort sym --percent-limit 1 >"$out/symbols-$name.txt"
done <"$out/pids.txt"

cat "$out/by-process.txt"
echo
jq -c . "$out/bench.json"
echo "profile: reports in $out (by-process.txt, top-symbols.txt, symbols-<process>.txt, perf.data)"
