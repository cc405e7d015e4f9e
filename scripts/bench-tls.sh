#!/usr/bin/env bash
# What mutual TLS and block tokens cost: the same `rozone bench` workloads against a dev
# cluster started secure (the default) and one started `--insecure` (plaintext, no
# certificates, no block tokens), in one run, alternating the order from run to run so
# drift on a shared machine hits both sides. One markdown table: TLS, plaintext, ratio.
#
#   scripts/bench-tls.sh                   3 runs per row, medians, release binaries (built)
#   scripts/bench-tls.sh --quick           1 run, short durations: a smoke run
#   options: --runs N (default 3)  --duration D (seconds per timed run, default 10)
#            --bin-dir DIR (use these binaries; no build)  --json  --keep
#
# Everything runs on 127.0.0.1 under one temp dir (on the disk of $TMPDIR, default /tmp);
# every cluster it started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

tool=bench-tls help_lines=2,14p
bins=(rozone rozone-scm rozone-om rozone-datanode)
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh "$@"

record() { jq -c --arg row "$1" --arg mode "$2" '. + {row: $row, mode: $mode}' <<<"$3" >>"$results"; }
med() { jq -r --arg row "$1" --arg mode "$2" "select(.row == \$row and .mode == \$mode) | .$3" "$results" | median; }

rz() { "$bin/rozone" "$@"; }
d=${duration}s
n64=12
$quick && n64=4
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

one_cluster() { # MODE RUN
    local mode=$1 r=$2 flags=() out
    [ "$mode" = plaintext ] && flags=(--insecure)
    rz_dir=$work/$mode$r
    say "$mode run $r/$runs: rozone dev up ${flags[*]}"
    out=$(rz --json dev up --detach --dir "$rz_dir" --bin-dir "$bin" "${flags[@]}") ||
        die "rozone dev up failed: see $rz_dir/*/stderr.log"
    record start "$mode" "$(jq '{seconds: (.ready_after_ms / 1000)}' <<<"$out")"
    export ROZONE_CONFIG=$rz_dir/client.toml
    bench() { # ROW ARGS...
        local row=$1
        shift
        say "$mode run $r/$runs: rozone bench $*"
        out=$(rz --json bench "$@") || die "rozone bench $* ($mode) failed"
        record "$row" "$mode" "$out"
    }
    bench omkeys-16 om-keys -c 16 -d "$d"
    bench lookup-16 lease-read --mode default -c 16 -d "$d"
    bench put-1m put --size 1MiB -c 16 -d "$d" --prefix p1m
    bench get-1m get -c 16 -d "$d" --prefix p1m
    bench put-64m put --size 64MiB -c 4 -n "$n64" --prefix p64m
    bench get-64m get -c 4 -n "$((2 * n64))" --prefix p64m
    rz dev down --dir "$rz_dir" >/dev/null
    rm -rf "$rz_dir"
    rz_dir=
}
for r in $(seq "$runs"); do
    if [ $((r % 2)) -eq 1 ]; then
        one_cluster tls "$r"
        one_cluster plaintext "$r"
    else
        one_cluster plaintext "$r"
        one_cluster tls "$r"
    fi
done
errors=$(jq -s '[.[] | .errors // 0] | add' "$results")
load_at_end=$(cut -d' ' -f1-3 /proc/loadavg)

if $json; then
    jq -s --arg profile "$profile" --argjson runs "$runs" --argjson errors "$errors" \
        '{profile: $profile, runs: $runs, errors: $errors, results: .}' "$results"
    exit 0
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "nan" || b == "nan") print "–"; else printf "%.2f×", a / b }'; }
num() { awk -v v="$1" -v p="${2:-0}" 'BEGIN { if (v == "nan" || v == "") print "–"; else printf "%.*f", p, v }'; }
line() { # LABEL ROW FIELD DECIMALS
    local t p
    t=$(med "$2" tls "$3") p=$(med "$2" plaintext "$3")
    printf '| %s | %s | %s | %s |\n' "$1" "$(num "$t" "$4")" "$(num "$p" "$4")" "$(ratio "$t" "$p")"
}
echo "TLS (mutual, block tokens) vs --insecure, $profile binaries, $runs run(s) per row (median), ${duration} s per timed run"
echo "load average at start $load_at_start, at end $load_at_end; bench errors: $errors"
echo
echo "| measure | TLS | plaintext | TLS / plaintext |"
echo "|---|---:|---:|---:|"
line "om-keys -c 16, ops/s" omkeys-16 ops_per_sec 0
line "om-keys -c 16, p50 ms" omkeys-16 p50_ms 2
line "key lookup DEFAULT -c 16, ops/s" lookup-16 ops_per_sec 0
line "put 1 MiB -c 16, MiB/s" put-1m mib_per_sec 1
line "get 1 MiB -c 16, MiB/s" get-1m mib_per_sec 1
line "put 64 MiB -c 4, MiB/s" put-64m mib_per_sec 1
line "get 64 MiB -c 4, MiB/s" get-64m mib_per_sec 1
line "dev cluster fresh start, s" start seconds 2
