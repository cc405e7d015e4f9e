#!/usr/bin/env bash
# Checks the systemd side of the deployment without installing anything:
#   1. `systemd-analyze verify` on the three unit files (ExecStart pointed at the built
#      binaries in a temporary copy, since they are not installed in /usr/local/bin here);
#   2. Type=notify end to end: a real `rozone-scm --init` started with NOTIFY_SOCKET, as
#      systemd would, reports STATUS while it starts, READY=1 only once /ready answers 200,
#      and STOPPING=1 on SIGTERM, then exits 0.
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
for b in rozone-scm rozone-om rozone-datanode; do
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
    echo "PASS: systemd-analyze verify: rozone-scm, rozone-om, rozone-datanode units clean"
else
    echo "SKIPPED: systemd-analyze verify (systemd-analyze not installed: apt-get install systemd)"
fi

command -v python3 >/dev/null 2>&1 || {
    echo "SKIPPED: Type=notify check (python3 not installed: it plays systemd's notify socket)"
    exit 0
}
python3 - "$bin_dir/rozone-scm" "$tmp" <<'EOF'
"""Plays systemd for one Type=notify start of rozone-scm --init."""
import os, signal, socket, subprocess, sys, time, urllib.request

binary, tmp = sys.argv[1], sys.argv[2]

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

sock_path = os.path.join(tmp, "notify.sock")
recv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
recv.bind(sock_path)
recv.settimeout(60)
http = free_port()
env = {k: v for k, v in os.environ.items() if not k.startswith("ROZONE_")}
env.update(NOTIFY_SOCKET=sock_path, RUST_LOG="warn")
args = [binary, "--init", "--data-dir", os.path.join(tmp, "scm"),
        "--http-addr", f"127.0.0.1:{http}",
        "--client-addr", f"127.0.0.1:{free_port()}",
        "--peer-addr", f"127.0.0.1:{free_port()}",
        "--checkpoint-addr", f"127.0.0.1:{free_port()}"]
proc = subprocess.Popen(args, env=env, stderr=open(os.path.join(tmp, "scm.log"), "w"))

def fail(msg):
    proc.kill()
    log = open(os.path.join(tmp, "scm.log")).read()[-2000:]
    sys.exit(f"systemd verify: FAILED: {msg}\n{log}")

def next_message():
    try:
        return recv.recv(4096).decode()
    except socket.timeout:
        fail("no notification from rozone-scm within 60 s")

messages = []
while True:
    m = next_message()
    messages.append(m)
    if "READY=1" in m.split("\n"):
        break
    if not m.startswith("STATUS="):
        fail(f"unexpected notification before READY=1: {m!r}")
try:
    code = urllib.request.urlopen(f"http://127.0.0.1:{http}/ready", timeout=10).status
except Exception as e:
    fail(f"READY=1 sent but /ready does not answer 200: {e}")
if code != 200:
    fail(f"READY=1 sent but /ready answered {code}")
proc.send_signal(signal.SIGTERM)
while True:
    m = next_message()
    messages.append(m)
    if "STOPPING=1" in m.split("\n"):
        break
try:
    rc = proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    fail("rozone-scm did not exit within 60 s of SIGTERM")
if rc != 0:
    fail(f"rozone-scm exited {rc} after SIGTERM")
if sum("READY=1" in m.split("\n") for m in messages) != 1:
    fail(f"READY=1 sent more than once: {messages}")
print("PASS: Type=notify: rozone-scm --init sent", " | ".join(m.replace("\n", "; ") for m in messages))
EOF
