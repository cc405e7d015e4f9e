# Sourced by the dev-cluster benchmarks (scripts/bench-tls.sh, scripts/bench-s3.sh), after
# `set -euo pipefail` and `cd` to the repo, with the script's arguments. The caller sets
#   tool        its name in messages (bench-tls)
#   help_lines  the sed range of its header comment that --help prints (2,14p)
#   bins        the binaries it needs in the bin dir
# This parses the options every such script takes (--runs N, --duration S, --bin-dir DIR,
# --quick, --json, --keep), builds the release binaries unless --bin-dir is given, makes the
# work dir and the results file, and stops the cluster in $rz_dir on exit. It defines
# say, die and median.

runs=3 duration=10 json=false keep=false quick=false bin=
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --duration) duration=${2:?--duration needs seconds}; shift 2 ;;
    --bin-dir) bin=${2:?--bin-dir needs a directory}; shift 2 ;;
    --quick) quick=true; shift ;;
    --json) json=true; shift ;;
    --keep) keep=true; shift ;;
    -h | --help) sed -n "$help_lines" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$tool: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if $quick; then
    runs=1 duration=3
fi
case $runs in '' | *[!0-9]* | 0) echo "$tool: --runs wants a positive number" >&2; exit 2 ;; esac
case $duration in '' | *[!0-9]* | 0) echo "$tool: --duration wants whole seconds" >&2; exit 2 ;; esac

say() { printf '== [%4ss] %s\n' "$SECONDS" "$*" >&2; }
die() {
    echo "$tool: $*" >&2
    exit 1
}
command -v jq >/dev/null || die "jq is missing: apt-get install jq"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}
if [ -z "$bin" ]; then
    bin=$CARGO_TARGET_DIR/release
    command -v ccache >/dev/null && export CC="ccache gcc" CXX="ccache g++"
    say "cargo build --release --workspace --bins"
    cargo build --release --workspace --bins >&2
fi
bin=$(cd "$bin" && pwd)
for b in "${bins[@]}"; do
    [ -x "$bin/$b" ] || die "missing $bin/$b"
done
profile=$(basename "$bin")

work=$(mktemp -d "${TMPDIR:-/tmp}/rozone-$tool.XXXXXX")
rz_dir=
cleanup() {
    local rc=$?
    set +e
    if [ -n "$rz_dir" ] && [ -f "$rz_dir/pids.json" ]; then
        "$bin/rozone" dev down --dir "$rz_dir" >/dev/null 2>&1
    fi
    if $keep; then
        echo "$tool: work dir kept: $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "$tool: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT TERM

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
results=$work/results.jsonl
: >"$results"
