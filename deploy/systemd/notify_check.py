"""Plays systemd's part for Type=notify starts of the real rozone-datanode and rozone-scm.

Run by verify.sh: notify_check.py BIN_DIR TMP_DIR. Each daemon gets its own NOTIFY_SOCKET (a
Unix datagram socket bound here), as systemd would give it:

1. a datanode started while no SCM runs must report STATUS=starting... and not READY=1;
2. `rozone-scm --init` must send READY=1, with /ready answering 200 by then;
3. the datanode then registers and sends READY=1, /ready answering 200;
4. SIGTERM: each sends STOPPING=1 and exits 0; each sent READY=1 exactly once.
"""

import os
import signal
import socket
import subprocess
import sys
import urllib.request

bin_dir, tmp = sys.argv[1], sys.argv[2]
procs = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(msg):
    for p in procs:
        p["proc"].kill()
    logs = "".join(f"--- {p['name']}\n" + open(p["log"]).read()[-1500:] for p in procs)
    sys.exit(f"systemd verify: FAILED: {msg}\n{logs}")


def start(name, args):
    sock_path = os.path.join(tmp, f"{name}.sock")
    recv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    recv.bind(sock_path)
    recv.settimeout(60)
    http = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROZONE_")}
    env.update(NOTIFY_SOCKET=sock_path, RUST_LOG="warn")
    log = os.path.join(tmp, f"{name}.log")
    # Plaintext: this checks the notify protocol, not TLS (docs/security.md).
    cmd = [os.path.join(bin_dir, name), "--data-dir", os.path.join(tmp, name),
           "--http-addr", f"127.0.0.1:{http}", "--insecure"] + args
    proc = subprocess.Popen(cmd, env=env, stderr=open(log, "w"))
    p = dict(name=name, proc=proc, recv=recv, http=http, log=log, messages=[])
    procs.append(p)
    return p


def next_message(p):
    try:
        m = p["recv"].recv(4096).decode()
    except socket.timeout:
        fail(f"no notification from {p['name']} within 60 s (so far: {p['messages']})")
    p["messages"].append(m)
    return m.split("\n")


def ready_status(p):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{p['http']}/ready", timeout=10).status
    except Exception as e:  # an HTTP 503 or a refused connection: say which
        return str(e)


def wait_ready(p):
    while True:
        m = next_message(p)
        if "READY=1" in m:
            break
        if not all(line.startswith("STATUS=") for line in m):
            fail(f"{p['name']}: unexpected notification before READY=1: {m}")
    code = ready_status(p)
    if code != 200:
        fail(f"{p['name']} sent READY=1 but /ready answers {code}")


def stop(p):
    p["proc"].send_signal(signal.SIGTERM)
    while "STOPPING=1" not in next_message(p):
        pass
    try:
        rc = p["proc"].wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail(f"{p['name']} did not exit within 60 s of SIGTERM")
    if rc != 0:
        fail(f"{p['name']} exited {rc} after SIGTERM")
    if sum("READY=1" in m.split("\n") for m in p["messages"]) != 1:
        fail(f"{p['name']} did not send READY=1 exactly once: {p['messages']}")


scm_client = free_port()
dn = start("rozone-datanode", [
    "--scm-addr", f"127.0.0.1:{scm_client}",
    "--container-addr", f"127.0.0.1:{free_port()}",
    "--raft-addr", f"127.0.0.1:{free_port()}",
    "--replication-addr", f"127.0.0.1:{free_port()}"])
first = next_message(dn)
if "READY=1" in first or not first[0].startswith("STATUS=starting"):
    fail(f"datanode with no SCM up: expected STATUS=starting..., got {first}")
scm = start("rozone-scm", [
    "--init",
    "--client-addr", f"127.0.0.1:{scm_client}",
    "--peer-addr", f"127.0.0.1:{free_port()}",
    "--checkpoint-addr", f"127.0.0.1:{free_port()}"])
wait_ready(scm)
wait_ready(dn)
stop(dn)
stop(scm)
for p in (dn, scm):
    sent = " | ".join(m.replace("\n", "; ") for m in p["messages"])
    print(f"PASS: Type=notify: {p['name']} sent {sent}")
