#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test in the
# workspace. Runs on a fresh Debian machine as root: it installs what
# RocksDB's build needs (libclang for bindgen) when missing.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -E 'test(foo)'  extra arguments go to cargo nextest
set -euo pipefail
cd "$(dirname "$0")/.."

# One persistent target dir: RocksDB's C++ takes many minutes to build on a
# small machine, so it is built once and kept across runs and checkouts.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
# ccache keeps RocksDB's compiled objects too: a change in the dependency graph that makes
# cargo rebuild librocksdb-sys then takes a minute, not twenty. The values must stay the
# same from run to run (cargo reruns the build script when CC/CXX change).
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}
if command -v ccache >/dev/null 2>&1; then
    export CC="ccache gcc" CXX="ccache g++"
fi

timings=()
summary() {
    echo "== stage timings"
    printf '   %s\n' "${timings[@]}"
}

# stage NAME COMMAND...: runs COMMAND, records its time, stops at the first failure.
stage() {
    local name=$1 start=$SECONDS rc=0
    shift
    echo "==> $name: $*"
    "$@" || rc=$?
    local result=ok
    [ "$rc" -eq 0 ] || result="FAILED (exit $rc)"
    timings+=("$(printf '%-10s %5ss  %s' "$name" $((SECONDS - start)) "$result")")
    if [ "$rc" -ne 0 ]; then
        summary
        exit "$rc"
    fi
}

have_libclang() {
    # libclang.so itself: libclang-cpp (installed by other packages) does not serve bindgen.
    compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        [ "$(dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null)" = 'install ok installed' ]
}

install_build_deps() {
    local packages=()
    have_libclang || packages+=(libclang-dev)
    command -v c++ >/dev/null || packages+=(g++)
    command -v ccache >/dev/null || packages+=(ccache)
    # The deploy stage: a static busybox goes into the offline image, systemd-analyze
    # verifies the units.
    compgen -G '/bin/busybox' >/dev/null || compgen -G '/usr/bin/busybox' >/dev/null ||
        packages+=(busybox-static)
    command -v systemd-analyze >/dev/null || packages+=(systemd)
    # The S3 black-box stage: real S3 clients against the gateway.
    command -v aws >/dev/null || packages+=(awscli)
    { python3 -c 'import boto3' || /usr/bin/python3 -c 'import boto3'; } >/dev/null 2>&1 ||
        packages+=(python3-boto3)
    if [ ${#packages[@]} -eq 0 ]; then
        echo "libclang, a C++ compiler, ccache, busybox, systemd-analyze, awscli and boto3 are present"
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing ${packages[*]}: install them (apt-get install ${packages[*]}) or run as root" >&2
        return 1
    fi
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
    if command -v ccache >/dev/null 2>&1; then
        export CC="ccache gcc" CXX="ccache g++"
    fi
}

run_tests() {
    if cargo nextest --version >/dev/null 2>&1; then
        # A process per test: failpoints are process-global.
        cargo nextest run --workspace --no-fail-fast "$@"
    else
        echo "cargo-nextest not found; falling back to cargo test (install: cargo install cargo-nextest)" >&2
        cargo test --workspace --no-fail-fast "$@"
    fi
}

stage build-deps install_build_deps
stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --workspace --all-targets -- -D warnings
stage tests run_tests "$@"
# nextest does not run doc tests; cargo test already did in the fallback.
if cargo nextest --version >/dev/null 2>&1; then
    stage doctests cargo test --workspace --doc
fi
# The S3 gateway under the AWS CLI and boto3, on the binaries the tests built.
stage s3-blackbox scripts/s3-blackbox.sh
# Config checks, systemd units, and the compose cluster (SKIPPED without a Docker engine).
stage deploy deploy/test.sh
summary
