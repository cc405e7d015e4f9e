#!/usr/bin/env bash
# Starts a local HA cluster (3 SCM, 3 OM, 3 datanodes) on loopback: the README's first
# quick-start command. On a fresh Debian machine it installs the build dependencies when
# missing (as scripts/test.sh does), builds the release binaries (the profile users run;
# RocksDB's C++ comes from the same ccache as the tests' build), then runs `rozone dev up`
# with the arguments given here.
#
#   scripts/dev-up.sh                          foreground; Ctrl-C stops the cluster
#   scripts/dev-up.sh --detach --dir /tmp/rz   background; stop: rozone dev down --dir /tmp/rz
set -euo pipefail
cd "$(dirname "$0")/.."

# The same shared target dir and compiler wrapper as scripts/test.sh, so one build serves both.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/rozone/ccache}

have_libclang() {
    compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        [ "$(dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null)" = 'install ok installed' ]
}

packages=()
have_libclang || packages+=(libclang-dev)
command -v c++ >/dev/null || packages+=(g++)
command -v ccache >/dev/null || packages+=(ccache)
if [ ${#packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "dev-up: missing ${packages[*]}: install them (apt-get install ${packages[*]}) or run as root" >&2
        exit 1
    fi
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
fi
if command -v ccache >/dev/null 2>&1; then
    export CC="ccache gcc" CXX="ccache g++"
fi

cargo build --release --workspace --bins
exec "$CARGO_TARGET_DIR/release/rozone" dev up "$@"
