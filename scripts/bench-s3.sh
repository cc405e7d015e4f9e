#!/usr/bin/env bash
# The S3 gateway against the native client: the same PUT and GET workloads through
# `rozone-s3g` (AWS SDK, SigV4, `rozone-s3-load`) and through the client library
# (`rozone bench put/get`), against one dev cluster per run, alternating which side goes
# first from run to run so drift on a shared machine hits both. One markdown table:
# gateway, native, ratio (the issue's target: gateway >= 80% of native).
#
#   scripts/bench-s3.sh                   3 runs per row, medians, release binaries (built)
#   scripts/bench-s3.sh --quick           1 run, short durations: a smoke run
#   options: --runs N (default 3)  --duration D (seconds per timed run, default 10)
#            --bin-dir DIR (use these binaries; no build)  --json  --keep
#
# Everything runs on 127.0.0.1 under one temp dir (on the disk of $TMPDIR, default /tmp);
# every cluster it started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

tool=bench-s3 help_lines=2,15p
bins=(rozone rozone-scm rozone-om rozone-datanode rozone-s3g rozone-s3-load)
# shellcheck source=scripts/bench-common.sh
. scripts/bench-common.sh "$@"

record() { jq -c --arg row "$1" --arg side "$2" '. + {row: $row, side: $side}' <<<"$3" >>"$results"; }
med() { jq -r --arg row "$1" --arg side "$2" "select(.row == \$row and .side == \$side) | .$3" "$results" | median; }

rz() { "$bin/rozone" "$@"; }
d=${duration}s
n64=12
$quick && n64=4
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ROW SIDE ARGS...: one timed run of one side; its report recorded.
native() {
    local row=$1 out
    shift
    say "run $r/$runs: rozone bench $*"
    out=$(rz --json bench "$@") || die "rozone bench $* failed"
    record "$row" native "$out"
}
gateway() {
    local row=$1 out
    shift
    say "run $r/$runs: rozone-s3-load $*"
    out=$("$bin/rozone-s3-load" --endpoint "$endpoint" --bucket bench --json "$@") ||
        die "rozone-s3-load $* failed"
    record "$row" gateway "$out"
}
# ROW SIZE CLIENTS PUT-LIMIT GET-LIMIT: put then get of one size on both sides, the side
# going first alternating by run.
pair() {
    local row=$1 size=$2 c=$3 put_limit=$4 get_limit=$5 p="p$1r$r"
    # shellcheck disable=SC2086 # the limits are two words each
    if [ $((r % 2)) -eq 1 ]; then
        gateway "put-$row" --prefix "$p" put --size "$size" -c "$c" $put_limit
        gateway "get-$row" --prefix "$p" get -c "$c" $get_limit
        native "put-$row" put --size "$size" -c "$c" $put_limit --prefix "$p"
        native "get-$row" get -c "$c" $get_limit --prefix "$p"
    else
        native "put-$row" put --size "$size" -c "$c" $put_limit --prefix "$p"
        native "get-$row" get -c "$c" $get_limit --prefix "$p"
        gateway "put-$row" --prefix "$p" put --size "$size" -c "$c" $put_limit
        gateway "get-$row" --prefix "$p" get -c "$c" $get_limit
    fi
}

for r in $(seq "$runs"); do
    rz_dir=$work/run$r
    say "run $r/$runs: rozone dev up"
    out=$(rz --json dev up --detach --dir "$rz_dir" --bin-dir "$bin") ||
        die "rozone dev up failed: see $rz_dir/*/stderr.log"
    endpoint=$(jq -r '.s3_endpoint // empty' <<<"$out")
    [ -n "$endpoint" ] || die "rozone dev up printed no s3_endpoint: $out"
    export ROZONE_CONFIG=$rz_dir/client.toml
    secret=$(rz s3 getsecret --user bench)
    AWS_ACCESS_KEY_ID=$(sed -n 's/^awsAccessKey=//p' <<<"$secret")
    AWS_SECRET_ACCESS_KEY=$(sed -n 's/^awsSecret=//p' <<<"$secret")
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
    [ -n "$AWS_ACCESS_KEY_ID" ] && [ -n "$AWS_SECRET_ACCESS_KEY" ] ||
        die "rozone s3 getsecret printed no awsAccessKey=/awsSecret= lines"
    pair 1m 1MiB 16 "-d $d" "-d $d"
    pair 64m 64MiB 4 "-n $n64" "-n $((2 * n64))"
    rz dev down --dir "$rz_dir" >/dev/null
    rm -rf "$rz_dir"
    rz_dir=
done
errors=$(jq -s '[.[] | .errors // 0] | add' "$results")
load_at_end=$(cut -d' ' -f1-3 /proc/loadavg)

if $json; then
    jq -s --arg profile "$profile" --argjson runs "$runs" --argjson errors "$errors" \
        '{profile: $profile, runs: $runs, errors: $errors, results: .}' "$results"
    exit 0
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "nan" || b == "nan") print "–"; else printf "%.0f%%", 100 * a / b }'; }
num() { awk -v v="$1" -v p="${2:-0}" 'BEGIN { if (v == "nan" || v == "") print "–"; else printf "%.*f", p, v }'; }
line() { # LABEL ROW FIELD DECIMALS
    local g n
    g=$(med "$2" gateway "$3") n=$(med "$2" native "$3")
    printf '| %s | %s | %s | %s |\n' "$1" "$(num "$g" "$4")" "$(num "$n" "$4")" "$(ratio "$g" "$n")"
}
echo "S3 gateway (rozone-s3-load, AWS SDK) vs native client (rozone bench), $profile binaries,"
echo "$runs run(s) per row (median), ${duration} s per timed 1 MiB run, $n64 puts / $((2 * n64)) gets of 64 MiB"
echo "load average at start $load_at_start, at end $load_at_end; errors: $errors"
echo
echo "| measure | gateway | native | gateway / native |"
echo "|---|---:|---:|---:|"
line "put 1 MiB -c 16, MiB/s" put-1m mib_per_sec 1
line "put 1 MiB -c 16, p99 ms" put-1m p99_ms 0
line "get 1 MiB -c 16, MiB/s" get-1m mib_per_sec 1
line "get 1 MiB -c 16, p99 ms" get-1m p99_ms 0
line "put 64 MiB -c 4, MiB/s" put-64m mib_per_sec 1
line "get 64 MiB -c 4, MiB/s" get-64m mib_per_sec 1
