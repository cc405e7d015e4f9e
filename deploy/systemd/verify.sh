#!/usr/bin/env bash
# Checks the systemd side of the deployment without installing anything:
#   1. `systemd-analyze verify` on the four unit files (ExecStart pointed at the built
#      binaries in a temporary copy, since they are not installed in /usr/local/bin here);
#   2. Type=notify end to end with the real binaries (notify_check.py): a datanode started
#      before any SCM reports STATUS=starting and no READY; `rozone-scm --init` sends READY=1
#      with /ready answering 200; then the datanode does too; SIGTERM: STOPPING=1, exit 0.
# Each part prints SKIPPED with the reason where its tool (systemd-analyze, python3) is missing.
#
#   deploy/systemd/verify.sh [--bin-dir DIR]     (default $CARGO_TARGET_DIR/debug)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin_dir=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}/debug
[ "${1:-}" != --bin-dir ] || bin_dir=${2:?--bin-dir needs a directory}
fail() {
    echo "systemd verify: FAILED: $*" >&2
    exit 1
}
for b in rozone-scm rozone-om rozone-datanode rozone-s3g; do
    [ -x "$bin_dir/$b" ] || fail "missing $bin_dir/$b: build with  cargo build --workspace --bins"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rozone-systemd.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if command -v systemd-analyze >/dev/null 2>&1; then
    for u in "$here"/rozone-*.service; do
        sed "s#/usr/local/bin/#$bin_dir/#g" "$u" >"$tmp/$(basename "$u")"
    done
    # verify prints nothing for a clean unit; any line is a finding.
    out=$(systemd-analyze verify --man=no "$tmp"/rozone-*.service 2>&1) || fail "systemd-analyze verify: $out"
    [ -z "$out" ] || fail "systemd-analyze verify: $out"
    echo "PASS: systemd-analyze verify: rozone-scm, rozone-om, rozone-datanode, rozone-s3g units clean"
else
    echo "SKIPPED: systemd-analyze verify (systemd-analyze not installed: apt-get install systemd)"
fi

command -v python3 >/dev/null 2>&1 || {
    echo "SKIPPED: Type=notify check (python3 not installed: it plays systemd's notify socket)"
    exit 0
}
python3 "$here/notify_check.py" "$bin_dir" "$tmp"
