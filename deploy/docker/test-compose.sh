#!/usr/bin/env bash
# The compose test: the three-node cluster of deploy/docker/compose.yaml in Docker, built
# offline, through a fault and back, and the OM bootstrap checks.
#
#   1. builds the release binaries (cargo build --release: the image ships what users run;
#      a no-op when up to date) and the image FROM scratch;
#   2. `compose up -d` (with the spare datanode dn4) under a project name of its own (the
#      one-shot `certs` service makes the CA and every certificate first), waits until every
#      daemon is healthy; a plaintext client is refused (mutual TLS everywhere);
#   3. puts keys and gets them back byte-identical through the CLI in the client container;
#      the S3 gateway is healthy, refuses an unsigned request, and the OM issues S3 secrets;
#   4. stops the SCM leader, the OM leader and one datanode, keeps putting and getting;
#   5. starts them again and waits until `admin scm roles` / `admin om roles` show every
#      member following the leader at its applied index, `admin datanode list` every
#      datanode healthy, and the old keys are still there;
#   6. adds a fourth OM with --bootstrap (joins, follows); starts one whose config lacks a
#      member (refused, non-zero, naming the member; ring membership unchanged).
# `compose down -v` runs at the end in a trap, on success and failure alike.
#
#   deploy/docker/test-compose.sh              the whole test
#   deploy/docker/test-compose.sh --scm-only   steps 1-2 and a restart for the SCM ring only
#   options: --no-build (use the image as it is), --keep (leave the cluster up on failure),
#            --dev-binaries (image of the dev-profile binaries the tests built: no release build)
#
# Prints `SKIPPED: <reason>` and exits 0 where no Docker engine runs; exits non-zero with a
# `test-compose: FAILED: ...` line on any failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
image=${ROZONE_IMAGE:-rozone:dev}
scm_only=false build=true keep=false profile=release
for arg in "$@"; do
    case $arg in
    --scm-only) scm_only=true ;;
    --no-build) build=false ;;
    --keep) keep=true ;;
    --dev-binaries) profile=dev ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-compose: unknown argument $arg" >&2; exit 2 ;;
    esac
done

skip() {
    echo "SKIPPED: $*"
    exit 0
}
fail() {
    echo "test-compose: FAILED: $*" >&2
    exit 1
}
started=$SECONDS
step() { printf '== [%3ss] %s\n' $((SECONDS - started)) "$*"; }
pass() { printf 'PASS: %s\n' "$*"; }

command -v docker >/dev/null 2>&1 || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "no Docker engine answers (docker info failed)"
if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
else
    skip "neither 'docker compose' nor docker-compose is installed"
fi
command -v jq >/dev/null 2>&1 || fail "jq is needed to read the CLI's --json output (apt-get install jq)"

export ROZONE_IMAGE=$image
# Lower case, unique per run: parallel runs and a user's own cluster never meet.
project="rozonetest$(date +%s)$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/rozone-compose-test.XXXXXX")
dc() { "${compose[@]}" -p "$project" -f "$here/compose.yaml" --profile join --profile spare "$@"; }

cleanup() {
    local rc=$?
    set +e
    if [ "$rc" -ne 0 ]; then
        echo "---- last log lines of each service (project $project)"
        dc logs --no-color --tail 25 2>&1 | tail -n 400
        if $keep; then
            echo "---- --keep: cluster left running; remove it with:"
            echo "     ${compose[*]} -p $project -f $here/compose.yaml --profile join --profile spare down -v"
            rm -rf "$work"
            exit "$rc"
        fi
    fi
    dc down -v --remove-orphans -t 20 >/dev/null 2>&1
    local left
    left=$(docker ps -aq --filter "label=com.docker.compose.project=$project")
    left+=$(docker volume ls -q --filter "label=com.docker.compose.project=$project")
    left+=$(docker network ls -q --filter "label=com.docker.compose.project=$project")
    if [ -n "$left" ]; then
        echo "test-compose: FAILED: containers, volumes or networks of $project left after down -v: $left" >&2
        [ "$rc" -ne 0 ] || rc=1
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------
# Helpers

cid() { dc ps -q "$1"; }

# The container's health ("healthy", "starting", "unhealthy"), or its state when it stopped.
health() {
    local id
    id=$(cid "$1")
    [ -n "$id" ] || { echo "absent"; return; }
    docker inspect -f '{{if eq .State.Status "running"}}{{if .State.Health}}{{.State.Health.Status}}{{else}}running{{end}}{{else}}{{.State.Status}} (exit {{.State.ExitCode}}){{end}}' "$id"
}

# wait_healthy SECONDS SERVICE...: every SERVICE healthy within SECONDS.
wait_healthy() {
    local limit=$1 deadline=$((SECONDS + $1)) s h
    shift
    for s in "$@"; do
        while h=$(health "$s") && [ "$h" != healthy ]; do
            case $h in
            exited* | dead* | absent) fail "$s is $h before becoming healthy: $(dc logs --no-color --tail 5 "$s" 2>&1 | tail -n 5)" ;;
            esac
            [ $SECONDS -lt $deadline ] || fail "$s not healthy within ${limit}s (health: $h)"
            sleep 1
        done
    done
}

# The CLI in the client container (stdin: nothing, or the script's would be read). With
# --scm-only the client service is not up: a one-off container of it runs the command.
cli() {
    if $scm_only; then
        dc run --rm --no-deps -T client rozone "$@" </dev/null
    else
        dc exec -T client rozone "$@" </dev/null
    fi
}

# ready SERVICE PORT: the daemon's /ready answers 200 now (the healthcheck status lags).
ready() { dc exec -T "$1" /bin/busybox wget -q -O /dev/null "http://127.0.0.1:$2/ready" </dev/null; }

# has_new_leader KIND OLD: the KIND ring, asked without OLD, has a ready leader other than OLD.
has_new_leader() {
    local json
    json=$(cli admin "$1" roles --json) || return 1
    jq -e --arg kind "$1" --arg old "$2" \
        '.leader_id != null and ($kind + (.leader_id | tostring)) != $old' \
        <<<"$json" >/dev/null || { echo "$1 roles: $json" >&2; return 1; }
}

# retry SECONDS CMD...: runs CMD until it succeeds, for up to SECONDS; the last error shows.
retry() {
    local limit=$1 deadline=$(($SECONDS + $1)) out
    shift
    until out=$("$@" 2>&1); do
        [ $SECONDS -lt $deadline ] || { echo "$out" >&2; return 1; }
        sleep 1
    done
    printf '%s' "$out"
}

# put_key NAME FILE / check_key NAME FILE: through the CLI, compared byte for byte.
put_key() { dc exec -T client rozone sh key put "/vol1/bucket1/$1" - <"$2" >/dev/null; }
check_key() {
    cli sh key get "/vol1/bucket1/$1" - >"$work/got" || return 1
    cmp -s "$2" "$work/got" || { echo "key $1: bytes differ from what was put" >&2; return 1; }
}

# roles_caught_up KIND COUNT: the KIND (scm|om) ring has COUNT voters, one ready leader, every
# other member a follower, and (where the JSON carries applied indexes) all at one index.
roles_caught_up() {
    local json
    json=$(cli admin "$1" roles --json) || return 1
    jq -e --argjson n "$2" '
        (.members | map(select(.voter)) | length) == $n
        and (.members | map(select(.role == "LEADER")) | length) == 1
        and (.members | map(select(.role != "LEADER")) | all(.role == "FOLLOWER"))
        and ([.members[] | .applied_index | select(. != null)] | unique | length) <= 1
    ' <<<"$json" >/dev/null || { echo "$1 roles: $json" >&2; return 1; }
}

# datanodes_healthy COUNT: the SCM leader lists COUNT datanodes, every one HEALTHY.
datanodes_healthy() {
    local json
    json=$(cli admin datanode list --json) || return 1
    jq -e --argjson n "$1" 'length == $n and all(.health == "HEALTHY")' <<<"$json" >/dev/null ||
        { echo "datanodes: $json" >&2; return 1; }
}

# leader_service KIND: the compose service of the KIND ring's leader (scm1, om2, ...).
leader_service() {
    local id
    id=$(cli admin "$1" roles --json | jq -er '.members[] | select(.role == "LEADER") | (.node_id // .id)') ||
        return 1
    echo "$1$id"
}

# ---------------------------------------------------------------------------------------
# 1. Image, offline

if $build; then
    step "build $profile binaries and the image $image (FROM scratch, no registry)"
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
    # Dev binaries: the test build's (--all-targets, a no-op after the tests; --bins alone
    # drops the tests' `failpoints` feature and rebuilds every daemon crate).
    cargo_args=(build --workspace --all-targets --quiet) bin_dir=$CARGO_TARGET_DIR/debug
    if [ "$profile" = release ]; then
        cargo_args=(build --workspace --bins --quiet --release) bin_dir=$CARGO_TARGET_DIR/release
    fi
    if command -v cargo >/dev/null 2>&1; then
        (cd "$root" && cargo "${cargo_args[@]}") || fail "cargo ${cargo_args[*]}"
    fi
    "$here/build-image.sh" --tag "$image" --bin-dir "$bin_dir" || fail "build-image.sh could not build $image"
    pass "image $image built offline from files on this machine"
fi
docker image inspect "$image" >/dev/null 2>&1 || fail "no image $image (run deploy/docker/build-image.sh)"

# ---------------------------------------------------------------------------------------
# 2. Up and healthy

if $scm_only; then
    step "up: scm1 (--init), scm2 and scm3 (--bootstrap), project $project"
    timeout 600 "${compose[@]}" -p "$project" -f "$here/compose.yaml" up -d scm1 scm2 scm3 \
        >"$work/up.log" 2>&1 || fail "compose up: $(tail -n 5 "$work/up.log")"
    wait_healthy 300 scm1 scm2 scm3
    retry 60 roles_caught_up scm 3 >/dev/null || fail "admin scm roles: not 3 voters following one leader"
    pass "SCM ring up: scm1 initialised it, scm2 and scm3 joined by --bootstrap; 3 voters, all following"
    scm_down=$(leader_service scm) || fail "admin scm roles shows no leader"
    others=$(printf '%s\n' scm1 scm2 scm3 | grep -vx "$scm_down" | tr '\n' ' ')
    step "stop the SCM leader $scm_down"
    dc stop -t 20 "$scm_down" >/dev/null 2>&1 || fail "compose stop $scm_down"
    retry 60 has_new_leader scm "$scm_down" >/dev/null || fail "no new SCM leader after stopping $scm_down"
    for s in $others; do
        retry 60 ready "$s" 9876 || fail "$s not ready with $scm_down stopped"
    done
    pass "a new SCM leader was elected among $others; both ready"
    step "start $scm_down again, restart the others one by one"
    dc start "$scm_down" >/dev/null 2>&1 || fail "compose start $scm_down"
    wait_healthy 120 "$scm_down"
    for s in $others; do
        dc restart -t 20 "$s" >/dev/null 2>&1 || fail "compose restart $s"
        wait_healthy 120 "$s"
    done
    retry 60 roles_caught_up scm 3 >/dev/null || fail "admin scm roles: not all following after the restarts"
    pass "restarted SCMs (--init and --bootstrap as plain restarts) rejoined: 3 voters, all following"
    dc exec -T scm3 /bin/busybox wget -q -O - http://127.0.0.1:9876/metrics </dev/null >"$work/metrics" ||
        fail "scm3 /metrics"
    grep -q '^rozone_raft_term ' "$work/metrics" || fail "scm3 /metrics lacks rozone_raft_term"
    pass "/metrics answers"
    step "done in $((SECONDS - started))s (SCM ring only)"
    exit 0
fi

step "up: 3 SCM, 3 OM, 3 datanodes + a spare (dn4) and the client, project $project"
# up -d waits for each depends_on healthcheck in turn, so it can take a while. dn4: with
# three datanodes, one stopped means no healthy RATIS/THREE pipeline to write on.
timeout 900 "${compose[@]}" -p "$project" -f "$here/compose.yaml" --profile spare up -d \
    >"$work/up.log" 2>&1 || fail "compose up: $(tail -n 5 "$work/up.log")"
wait_healthy 300 scm1 scm2 scm3 om1 om2 om3 dn1 dn2 dn3 dn4 s3g
pass "cluster up, every daemon and the S3 gateway healthy on /ready"

# ---------------------------------------------------------------------------------------
# 3. Put and get

for i in 1 2 3 4 5 6; do
    head -c $((i * 300000 + 17)) /dev/urandom >"$work/obj$i"
done
step "create a volume and a bucket, put and get keys through the CLI"
retry 60 cli sh volume create /vol1 >/dev/null || fail "rozone sh volume create /vol1"
retry 60 cli sh bucket create /vol1/bucket1 >/dev/null || fail "rozone sh bucket create /vol1/bucket1"
retry 60 put_key k1 "$work/obj1" >/dev/null || fail "put /vol1/bucket1/k1"
check_key k1 "$work/obj1" || fail "get /vol1/bucket1/k1"
pass "put and get of a key through the CLI in a container"
retry 60 roles_caught_up scm 3 >/dev/null || fail "admin scm roles: not 3 members following"
retry 60 roles_caught_up om 3 >/dev/null || fail "admin om roles: not 3 members following"
retry 60 datanodes_healthy 4 >/dev/null || fail "admin datanode list: not 4 healthy datanodes"
pass "admin scm roles and admin om roles show 3 members each, all following; 4 datanodes healthy"
# Mutual TLS on every port: a client without a certificate gets no answer from the OMs.
if out=$(dc exec -T client rozone --insecure --timeout 5s admin om roles </dev/null 2>&1); then
    fail "a plaintext client without a certificate was answered: $out"
fi
pass "the cluster runs mutual TLS: a plaintext client is refused"

step "the S3 gateway: a user's secret from the OM, an anonymous request refused"
secret=$(retry 60 cli s3 getsecret --user compose) || fail "rozone s3 getsecret"
grep -q '^awsAccessKey=compose$' <<<"$secret" && grep -q '^awsSecret=.' <<<"$secret" ||
    fail "rozone s3 getsecret printed no awsAccessKey/awsSecret lines: $secret"
# busybox wget exits non-zero on an error status and prints it: S3's 403 for no signature.
anon=$(dc exec -T s3g /bin/busybox wget -q -O /dev/null http://127.0.0.1:9878/ </dev/null 2>&1) &&
    fail "an anonymous ListBuckets succeeded on the gateway"
grep -q 403 <<<"$anon" || fail "want 403 for an anonymous ListBuckets, got: $anon"
pass "s3 getsecret prints the user's key pair; the gateway refuses an unsigned request (403)"

# ---------------------------------------------------------------------------------------
# 4. One SCM, one OM and one datanode down

scm_down=$(leader_service scm) || fail "admin scm roles shows no leader"
om_down=$(leader_service om) || fail "admin om roles shows no leader"
dn_down=dn2
step "stop the SCM leader ($scm_down), the OM leader ($om_down) and $dn_down"
dc stop -t 20 "$scm_down" "$om_down" "$dn_down" >/dev/null 2>&1 || fail "compose stop"
# Generous: a new leader is elected within seconds, clients retry with the leader hint.
retry 90 put_key k2 "$work/obj2" >/dev/null || fail "put k2 with $scm_down, $om_down, $dn_down down"
retry 60 put_key k3 "$work/obj3" >/dev/null || fail "put k3 with $scm_down, $om_down, $dn_down down"
for k in 1 2 3; do
    retry 60 check_key "k$k" "$work/obj$k" || fail "get k$k with $scm_down, $om_down, $dn_down down"
done
pass "puts and gets go on with the SCM leader, the OM leader and a datanode down"

# ---------------------------------------------------------------------------------------
# 5. Back, and caught up

step "start $scm_down, $om_down and $dn_down again"
dc start "$scm_down" "$om_down" "$dn_down" >/dev/null 2>&1 || fail "compose start"
wait_healthy 180 "$scm_down" "$om_down" "$dn_down"
retry 90 roles_caught_up scm 3 >/dev/null || fail "admin scm roles: $scm_down did not catch up"
retry 90 roles_caught_up om 3 >/dev/null || fail "admin om roles: $om_down did not catch up"
retry 90 datanodes_healthy 4 >/dev/null || fail "admin datanode list: $dn_down not healthy again"
retry 60 put_key k4 "$work/obj4" >/dev/null || fail "put k4 after the restart"
for k in 1 2 3 4; do
    retry 60 check_key "k$k" "$work/obj$k" || fail "get k$k after the restart"
done
pass "restarted members caught up: all following in admin scm/om roles, $dn_down healthy, every key readable"

# ---------------------------------------------------------------------------------------
# 6. OM bootstrap: a complete config joins, an incomplete one is refused

step "add om4 with --bootstrap"
dc up -d --no-deps om4 >"$work/om4.log" 2>&1 || fail "compose up om4: $(tail -n 5 "$work/om4.log")"
wait_healthy 180 om4
retry 90 roles_caught_up om 4 >/dev/null || fail "admin om roles: om4 did not join as a follower"
pass "om4 joined the running OM ring with --bootstrap and follows"

step "start om-incomplete (its config lacks om2) with --bootstrap"
rc=0
timeout 180 "${compose[@]}" -p "$project" -f "$here/compose.yaml" --profile join \
    run --rm --no-deps -T om-incomplete >"$work/refused.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "om-incomplete --bootstrap succeeded; it must be refused: $(tail -n 5 "$work/refused.log")"
[ "$rc" -ne 124 ] || fail "om-incomplete --bootstrap hung instead of being refused"
# The refusal names the missing member (node 2, om2) and what to set.
grep -E 'refused.*(\[([0-9]+, )*2(, [0-9]+)*\]|OM 2\b)' "$work/refused.log" >/dev/null ||
    fail "om-incomplete's refusal does not name the missing member: $(tail -n 5 "$work/refused.log")"
echo "   refused (exit $rc): $(grep -Ei 'refus|missing|no address' "$work/refused.log" | tail -n 1)"
retry 30 roles_caught_up om 4 >/dev/null || fail "OM ring changed after the refused bootstrap"
cli admin om roles --json | jq -e '[.members[] | (.node_id // .id)] | index(5) == null' >/dev/null ||
    fail "node 5 is in the OM ring after its bootstrap was refused"
pass "om-incomplete refused with a message naming om2, non-zero exit, ring membership unchanged"

for k in 1 2 3 4; do
    check_key "k$k" "$work/obj$k" || fail "get k$k at the end"
done
step "all passed in $((SECONDS - started))s; compose down -v follows"
