#!/usr/bin/env bash
# rozone and etcd side by side, in one run on this machine, with the disk measured by fio:
# one markdown table with rozone, the reference and their ratio per row (BENCHMARKS.md is
# made from it).
#
#   scripts/bench-vs-etcd.sh                 3 runs per row, medians (~10 minutes after the build)
#   scripts/bench-vs-etcd.sh --quick         1 run, short durations: a smoke run (~2 minutes)
#   options: --runs N (default 3)  --duration D (seconds per timed run, default 10)
#            --json (one JSON object instead of the table)  --keep (keep the work dir)
#            --no-build (use the release binaries as they are)
#            --bin-dir DIR (use the binaries in DIR, e.g. $CARGO_TARGET_DIR/profiling; no build)
#
# What it does, all on 127.0.0.1 and under one temp dir (on the disk of $TMPDIR, default
# /tmp), stopping every process it started on exit (trap):
#   1. installs etcd-server, fio, jq and the build dependencies with apt when missing (root);
#   2. builds the release profile: cargo build --release --workspace --bins;
#   3. fio on the work dir: fdatasync'd 4 KiB writes (the log's fsync rate), a 1 GiB
#      sequential write ending with fsync, direct 1 MiB reads at queue depth 16;
#   4. etcd 3.4, three members, and rozone-etcd-load (bench/) at 1/16/64 clients: put,
#      serializable get, linearizable get; clients talk to the leader, as rozone's do;
#   5. etcd stopped; `rozone dev up` (fresh start, restart, idle RSS), then `rozone bench`
#      at the same concurrency: om-keys, key lookups (DEFAULT, LINEARIZABLE), put/get 1 MiB
#      at 16 clients and 64 MiB at 4.
# Each row is the median of the runs; progress goes to stderr, the table to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

runs=3 duration=10 json=false keep=false build=true quick=false bin=
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --quick) quick=true; shift ;;
    --json) json=true; shift ;;
    --keep) keep=true; shift ;;
    --no-build) build=false; shift ;;
    --bin-dir) bin=${2:?--bin-dir needs a directory}; build=false; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-vs-etcd: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if $quick; then
    runs=1 duration=3
fi
case $runs in '' | *[!0-9]* | 0) echo "bench-vs-etcd: --runs wants a positive number" >&2; exit 2 ;; esac
case $duration in '' | *[!0-9]* | 0) echo "bench-vs-etcd: --duration wants whole seconds" >&2; exit 2 ;; esac

say() { printf '== [%4ss] %s\n' "$SECONDS" "$*" >&2; }
die() {
    echo "bench-vs-etcd: $*" >&2
    exit 1
}

# ---------------------------------------------------------------------------------------
# 1. Tools

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}
have_libclang() {
    compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        [ "$(dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null)" = 'install ok installed' ]
}
packages=()
command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || packages+=(etcd-server)
command -v fio >/dev/null || packages+=(fio)
command -v jq >/dev/null || packages+=(jq)
command -v curl >/dev/null || packages+=(curl)
if $build; then
    have_libclang || packages+=(libclang-dev)
    command -v c++ >/dev/null || packages+=(g++)
    command -v ccache >/dev/null || packages+=(ccache)
fi
if [ ${#packages[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "missing ${packages[*]}: install them (apt-get install ${packages[*]}) or run as root"
    say "installing ${packages[*]}"
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}" >&2
fi
etcd_bin=$(command -v etcd || echo /usr/bin/etcd)
# Debian's etcd-server 3.4 refuses to start on architectures other than amd64 unless told.
[ "$(uname -m)" = x86_64 ] || export ETCD_UNSUPPORTED_ARCH=${ETCD_UNSUPPORTED_ARCH:-$(dpkg --print-architecture)}

bin=${bin:-$CARGO_TARGET_DIR/release}
if $build; then
    command -v ccache >/dev/null && export CC="ccache gcc" CXX="ccache g++"
    say "cargo build --release --workspace --bins"
    cargo build --release --workspace --bins >&2
fi
for b in rozone rozone-scm rozone-om rozone-datanode rozone-etcd-load; do
    [ -x "$bin/$b" ] || die "missing $bin/$b (run without --no-build)"
done

# ---------------------------------------------------------------------------------------
# Work dir, processes, cleanup

work=$(mktemp -d "${TMPDIR:-/tmp}/rozone-vs-etcd.XXXXXX")
etcd_pids=()
rz_dir=
cleanup() {
    local rc=$?
    set +e
    if [ -n "$rz_dir" ] && [ -f "$rz_dir/pids.json" ]; then
        "$bin/rozone" dev down --dir "$rz_dir" >/dev/null 2>&1
    fi
    stop_etcd
    if $keep; then
        echo "bench-vs-etcd: work dir kept: $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
stop_etcd() {
    local p
    for p in "${etcd_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # A member killed by the signal exits non-zero: not a failure here.
    for p in "${etcd_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    etcd_pids=()
}
trap cleanup EXIT
trap 'echo "bench-vs-etcd: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

fstype=$(stat -f -c %T "$work")
[ "$fstype" != tmpfs ] || die "$work is on tmpfs: fsync means nothing there; set TMPDIR to a directory on a disk"

# Machine state, for the record: load and whether compilers run next to the benchmark.
compilers() { pgrep -c -x 'rustc|cc1plus|cc1|ld' 2>/dev/null || true; }
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
compilers_seen=$(compilers)
note_machine() {
    local c
    c=$(compilers)
    [ "${c:-0}" -le "${compilers_seen:-0}" ] || compilers_seen=$c
}

# median of the numbers on stdin (one per line)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# results: one JSON object per measured run, appended to $work/results.jsonl with a "row" key
results=$work/results.jsonl
: >"$results"
record() { # ROW JSON
    jq -c --arg row "$1" '. + {row: $row}' <<<"$2" >>"$results"
}
# field of the median run: med ROW FIELD
med() { jq -r --arg row "$1" "select(.row == \$row) | .$2" "$results" | median; }

# ---------------------------------------------------------------------------------------
# 2. The disk: fio

fio_dir=$work/fio
mkdir -p "$fio_dir"
fio_size=1G
$quick && fio_size=256M
fio_json() { fio --output-format=json --directory="$fio_dir" "$@" 2>>"$work/fio.err"; }
for r in $(seq "$runs"); do
    say "fio run $r/$runs: fdatasync rate, sequential write + fsync, direct read QD16"
    out=$(fio_json --name=fsync --rw=write --bs=4k --size=256M --fdatasync=1 --ioengine=sync \
        --time_based --runtime="$duration")
    record fio-fsync "$(jq '{ops_per_sec: .jobs[0].write.iops}' <<<"$out")"
    rm -f "$fio_dir"/fsync*
    # Bandwidth over the whole job, the final fsync included (end_fsync counts in its runtime).
    out=$(fio_json --name=seqwrite --rw=write --bs=1M --size="$fio_size" --end_fsync=1 --ioengine=sync)
    record fio-write "$(jq '{mib_per_sec: (.jobs[0].write.io_bytes / 1048576 / (.jobs[0].job_runtime / 1000))}' <<<"$out")"
    out=$(fio_json --name=seqwrite --rw=read --bs=1M --size="$fio_size" --direct=1 --iodepth=16 \
        --ioengine=libaio --time_based --runtime="$duration")
    record fio-read "$(jq '{mib_per_sec: (.jobs[0].read.bw_bytes / 1048576)}' <<<"$out")"
    rm -f "$fio_dir"/seqwrite*
    note_machine
done
rm -rf "$fio_dir"

# ---------------------------------------------------------------------------------------
# 3. etcd: three members on 127.0.0.1

base=${ETCD_BASE_PORT:-32379}
cluster=""
for i in 1 2 3; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 10 * i + 1))"
done
endpoint() { echo "http://127.0.0.1:$((base + 10 * $1))"; }
say "etcd: starting 3 members ($($etcd_bin --version 2>/dev/null | head -n 1))"
for i in 1 2 3; do
    mkdir -p "$work/etcd/m$i"
    "$etcd_bin" --name "m$i" --data-dir "$work/etcd/m$i/data" \
        --listen-client-urls "$(endpoint $i)" --advertise-client-urls "$(endpoint $i)" \
        --listen-peer-urls "http://127.0.0.1:$((base + 10 * i + 1))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((base + 10 * i + 1))" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --initial-cluster-token "rozone-bench-$$" \
        >"$work/etcd/m$i/log" 2>&1 &
    etcd_pids+=($!)
done
# The leader, from the members' status over the gRPC gateway; waits until one is elected.
etcd_leader=
for _ in $(seq 300); do
    for i in 1 2 3; do
        st=$(curl -sf -m 2 -X POST -d '{}' "$(endpoint $i)/v3/maintenance/status" 2>/dev/null) || continue
        if [ "$(jq -r '.leader // "0"' <<<"$st")" != 0 ] &&
            [ "$(jq -r '.leader' <<<"$st")" = "$(jq -r '.header.member_id' <<<"$st")" ]; then
            etcd_leader=$(endpoint $i)
        fi
    done
    [ -z "$etcd_leader" ] || break
    for p in "${etcd_pids[@]}"; do
        kill -0 "$p" 2>/dev/null || die "an etcd member exited: $(tail -n 5 "$work"/etcd/m*/log)"
    done
    sleep 0.1
done
[ -n "$etcd_leader" ] || die "etcd elected no leader within 30 s: $(tail -n 5 "$work"/etcd/m*/log)"
say "etcd: leader at $etcd_leader"

etcd_load() { # ROW OP CLIENTS
    local r out
    for r in $(seq "$runs"); do
        say "etcd $2 -c $3 run $r/$runs"
        out=$("$bin/rozone-etcd-load" --endpoints "$etcd_leader" --op "$2" --clients "$3" \
            --duration "${duration}s" --json) || die "rozone-etcd-load --op $2 -c $3 failed"
        record "$1" "$out"
        note_machine
    done
}
etcd_load etcd-put-1 put 1
etcd_load etcd-put-16 put 16
etcd_load etcd-put-64 put 64
etcd_load etcd-get-ser-16 get-serializable 16
etcd_load etcd-get-lin-16 get-linearizable 16
etcd_version=$("$etcd_bin" --version 2>/dev/null | awk '/etcd Version/ { print $3 }')
stop_etcd
rm -rf "$work/etcd"

# ---------------------------------------------------------------------------------------
# 4. rozone: the dev cluster of release binaries

rz() { "$bin/rozone" "$@"; }
rss_mib() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
for r in $(seq "$runs"); do
    rz_dir=$work/rz$r
    say "rozone dev up (fresh) run $r/$runs"
    out=$(rz --json dev up --detach --dir "$rz_dir" --bin-dir "$bin") || die "rozone dev up failed: see $rz_dir/*/stderr.log"
    record start-fresh "$(jq '{seconds: (.ready_after_ms / 1000)}' <<<"$out")"
    # Idle RSS: a fresh cluster left alone for 5 s.
    sleep 5
    for kind in scm om dn; do
        for pid in $(jq -r --arg k "$kind" '.[] | select(.name | startswith($k)) | .pid' "$rz_dir/pids.json"); do
            record "rss-$kind" "{\"mib\": $(rss_mib "$pid")}"
        done
    done
    rz dev down --dir "$rz_dir" >/dev/null
    say "rozone dev up (restart) run $r/$runs"
    out=$(rz --json dev up --detach --dir "$rz_dir" --bin-dir "$bin") || die "rozone dev up (restart) failed: see $rz_dir/*/stderr.log"
    record start-restart "$(jq '{seconds: (.ready_after_ms / 1000)}' <<<"$out")"
    if [ "$r" -lt "$runs" ]; then
        rz dev down --dir "$rz_dir" >/dev/null
        rm -rf "$rz_dir"
    fi
    note_machine
done
export ROZONE_CONFIG=$rz_dir/client.toml

rz_bench() { # ROW ARGS...
    local row=$1 r out
    shift
    for r in $(seq "$runs"); do
        say "rozone bench $* run $r/$runs"
        out=$(rz --json bench "$@") || die "rozone bench $* failed"
        record "$row" "$out"
        note_machine
    done
}
d=${duration}s
n64=12 g64=24
$quick && n64=4 g64=8
rz_bench rz-omkeys-1 om-keys -c 1 -d "$d"
rz_bench rz-omkeys-16 om-keys -c 16 -d "$d"
rz_bench rz-omkeys-64 om-keys -c 64 -d "$d"
rz_bench rz-lookup-default-16 lease-read --mode default -c 16 -d "$d"
rz_bench rz-lookup-lin-16 lease-read --mode linearizable -c 16 -d "$d"
rz_bench rz-put-1m put --size 1MiB -c 16 -d "$d" --prefix p1m
rz_bench rz-get-1m get -c 16 -d "$d" --prefix p1m
rz_bench rz-put-64m put --size 64MiB -c 4 -n "$n64" --prefix p64m
rz_bench rz-get-64m get -c 4 -n "$g64" --prefix p64m
errors=$(jq -s '[.[] | .errors // 0] | add' "$results")

# ---------------------------------------------------------------------------------------
# 5. The table

load_at_end=$(cut -d' ' -f1-3 /proc/loadavg)
# row LABEL ROZONE REFERENCE RATIO TARGET (numbers formatted by the caller)
rows=()
row() { rows+=("$(jq -cn --arg l "$1" --arg z "$2" --arg ref "$3" --arg ratio "$4" --arg t "$5" \
    '{row: $l, rozone: $z, reference: $ref, ratio: $ratio, target: $t}')"); }
# fmt NUMBER [DECIMALS]: 12345.6 -> 12,346 (thousands grouped, "–" when missing)
fmt() {
    awk -v v="$1" -v p="${2:-0}" 'BEGIN {
        if (v == "nan" || v == "") { print "–"; exit }
        s = sprintf("%.*f", p, v); i = index(s, "."); if (i == 0) i = length(s) + 1
        head = substr(s, 1, i - 1); tail = substr(s, i); sign = ""
        if (substr(head, 1, 1) == "-") { sign = "-"; head = substr(head, 2) }
        out = ""
        while (length(head) > 3) {
            out = "," substr(head, length(head) - 2) out
            head = substr(head, 1, length(head) - 3)
        }
        print sign head out tail
    }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "nan" || b == "nan") print "–"; else printf "%.2f×", a / b }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "nan" || b == "nan") print "–"; else printf "%.0f%%", 100 * a / b }'; }

for c in 1 16 64; do
    z=$(med "rz-omkeys-$c" ops_per_sec) e=$(med "etcd-put-$c" ops_per_sec)
    target="≥ 2× (aim 4×)"
    [ "$c" = 1 ] && target="–"
    row "om-keys -c $c vs etcd put, ops/s" "$(fmt "$z")" "$(fmt "$e")" "$(ratio "$z" "$e")" "$target"
done
z=$(med rz-omkeys-1 p50_ms) e=$(med etcd-put-1 p50_ms)
row "om-keys -c 1 vs etcd put, p50 ms" "$(fmt "$z" 2)" "$(fmt "$e" 2)" "$(ratio "$z" "$e")" "≤ 1.5×"
z=$(med rz-lookup-default-16 ops_per_sec) e=$(med etcd-get-ser-16 ops_per_sec)
row "key lookup DEFAULT -c 16 vs etcd serializable get, ops/s" "$(fmt "$z")" "$(fmt "$e")" "$(ratio "$z" "$e")" "≥ 2×"
z=$(med rz-lookup-lin-16 ops_per_sec) e=$(med etcd-get-lin-16 ops_per_sec)
row "key lookup LINEARIZABLE -c 16 vs etcd linearizable get, ops/s" "$(fmt "$z")" "$(fmt "$e")" "$(ratio "$z" "$e")" "–"
w=$(med fio-write mib_per_sec) rd=$(med fio-read mib_per_sec)
w3=$(awk -v w="$w" 'BEGIN { print w / 3 }')
z=$(med rz-put-64m mib_per_sec)
row "put 64 MiB -c 4 vs fio write/3, MiB/s" "$(fmt "$z" 1)" "$(fmt "$w3" 1)" "$(pct "$z" "$w3")" "≥ 80%"
z=$(med rz-put-1m mib_per_sec)
row "put 1 MiB -c 16 vs fio write/3, MiB/s" "$(fmt "$z" 1)" "$(fmt "$w3" 1)" "$(pct "$z" "$w3")" "≥ 60%"
row "put 1 MiB -c 16, p99 ms" "$(fmt "$(med rz-put-1m p99_ms)" 1)" "–" "–" "≤ 200"
z=$(med rz-get-64m mib_per_sec)
row "get 64 MiB -c 4 vs fio direct read QD16, MiB/s" "$(fmt "$z" 1)" "$(fmt "$rd" 1)" "$(pct "$z" "$rd")" "≥ 90%"
z=$(med rz-get-1m mib_per_sec)
row "get 1 MiB -c 16 vs fio direct read QD16, MiB/s" "$(fmt "$z" 1)" "$(fmt "$rd" 1)" "$(pct "$z" "$rd")" "≥ 90%"
row "fio fdatasync'd 4 KiB writes/s (the disk's fsync rate)" "–" "$(fmt "$(med fio-fsync ops_per_sec)")" "–" "–"
row "dev cluster fresh start, s" "$(fmt "$(med start-fresh seconds)" 2)" "–" "–" "≤ 1.5"
row "dev cluster restart, s" "$(fmt "$(med start-restart seconds)" 2)" "–" "–" "≤ 1"
for kind in scm om dn; do
    name=$kind
    [ "$kind" = dn ] && name=datanode
    row "idle RSS $name, MiB (median of all)" "$(fmt "$(med "rss-$kind" mib)" 1)" "–" "–" "≤ 40"
done

header="rozone vs etcd $etcd_version and fio, $(date -u +%Y-%m-%dT%H:%MZ), $runs run(s) per row (median), ${duration}s per timed run, $(nproc) cores; load average at start $load_at_start, at end $load_at_end; compiler processes seen during the run: ${compilers_seen:-0}; rozone bench errors: $errors"
if $json; then
    printf '%s\n' "${rows[@]}" | jq -s --arg h "$header" --slurpfile runs "$results" \
        '{about: $h, rows: ., runs: $runs}'
else
    echo "$header"
    echo
    echo "| measure | rozone | reference | ratio | target |"
    echo "|---|---:|---:|---:|---|"
    for r in "${rows[@]}"; do
        jq -r '"| \(.row) | \(.rozone) | \(.reference) | \(.ratio) | \(.target) |"' <<<"$r"
    done
fi
