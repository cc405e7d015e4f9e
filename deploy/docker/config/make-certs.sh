#!/bin/sh
# The compose cluster's one-shot certificate step (service `certs` in compose.yaml): a
# cluster CA and a certificate for every service, in the `tls` volume that every container
# mounts at /var/lib/rozone/tls. Idempotent: what exists is kept, so a restarted cluster
# keeps its CA and certificates. Host names are the compose service names (the SANs that
# clients check). See docs/deploy.md and docs/security.md.
#
# One volume holds the CA key and every node's key: fine for a cluster on one Docker host;
# across hosts, issue each host's files with `rozone admin cert issue` and keep ca.key
# off the cluster's machines.
set -eu
out=/var/lib/rozone/tls
umask 077
[ -f "$out/ca/ca.crt" ] || rozone admin ca init --dir "$out/ca"

# issue ROLE ID HOST
issue() {
    [ -f "$out/$1-$2.crt" ] ||
        rozone admin cert issue --ca-dir "$out/ca" --role "$1" --id "$2" --host "$3" --out "$out" >/dev/null
}
for i in 1 2 3; do issue scm "$i" "scm$i"; done
for i in 1 2 3 4; do issue om "$i" "om$i"; done
issue om 5 om-incomplete
for i in 1 2 3 4; do issue datanode "$i" "dn$i"; done
issue s3g 1 s3g
issue admin 1 client
echo "certificates ready in $out"
