#!/usr/bin/env bash
# Every deployment check, for scripts/test.sh (stage "deploy"):
#   1. each example config (deploy/config, deploy/docker/config) passes its daemon's
#      --config-check, with every node id the compose file gives it;
#   2. docs/config/*.md match the binaries' --print-sample-config (deploy/gen-config-docs.sh --check);
#   3. the systemd units verify and Type=notify works (deploy/systemd/verify.sh);
#   4. the compose cluster test (deploy/docker/test-compose.sh; SKIPPED without a Docker engine).
# Builds the binaries first (cargo build --workspace --all-targets: a no-op after the tests;
# `--bins` alone would leave out the tests' dev-dependency features, `failpoints` among them,
# and so rebuild every daemon crate here and again in the next test run).
# Extra arguments go to test-compose.sh (e.g. --scm-only).
set -euo pipefail

deploy=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$deploy/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
bin_dir=$CARGO_TARGET_DIR/debug
fail() {
    echo "deploy test: FAILED: $*" >&2
    exit 1
}

(cd "$repo" && cargo build --workspace --all-targets --quiet) || fail "cargo build --workspace --all-targets"

# config_check DAEMON FILE [NODE_ID]: FILE is a valid config for rozone-DAEMON.
config_check() {
    local out
    out=$(env -u ROZONE_CONFIG ${3:+ROZONE_NODE__ID=$3} "$bin_dir/rozone-$1" --config "$2" --config-check 2>&1) ||
        fail "${2#"$repo"/} (node ${3:-as set}) does not pass rozone-$1 --config-check: $out"
}
for d in scm om datanode s3g; do
    config_check "$d" "$deploy/config/$d.toml"
done
config_check s3g "$deploy/docker/config/s3g.toml"
for id in 1 2 3; do
    config_check scm "$deploy/docker/config/scm.toml" "$id"
    config_check om "$deploy/docker/config/om.toml" "$id"
    config_check datanode "$deploy/docker/config/datanode.toml" "$id"
done
config_check om "$deploy/docker/config/om.toml" 4
# Valid as a config: its refusal comes from the ring, at --bootstrap.
config_check om "$deploy/docker/config/om-incomplete.toml" 5
echo "PASS: example configs pass --config-check"

"$deploy/gen-config-docs.sh" --check --bin-dir "$bin_dir" || fail "config reference out of date"
echo "PASS: docs/config/{scm,om,datanode,s3g}.md match --print-sample-config"

"$deploy/systemd/verify.sh" --bin-dir "$bin_dir" || fail "systemd units"

# The test command runs the compose test on the dev-profile binaries the tests already
# built: a release build of every crate would add ~20 CPU-minutes to a fresh CI run. Users'
# images and `deploy/docker/test-compose.sh` alone build release binaries.
"$deploy/docker/test-compose.sh" --dev-binaries "$@" || fail "compose test"
