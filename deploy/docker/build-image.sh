#!/usr/bin/env bash
# Builds the rozone image (the daemons and the `rozone` CLI) from binaries already
# built on this machine: the release profile (cargo build --release --workspace --bins),
# stripped (any binary given with --bin-dir is stripped on its way into the image).
#
#   deploy/docker/build-image.sh                       FROM scratch, no registry needed (default)
#   deploy/docker/build-image.sh --base debian:bookworm-slim
#                                                      Dockerfile on a base image (pulled, or local)
#   options: --tag rozone:dev   --bin-dir DIR (default $CARGO_TARGET_DIR/release)
#            --busybox PATH (a statically linked busybox; default /bin/busybox)
#
# The scratch image is assembled from files on this machine only: the binaries, the shared
# libraries `ldd` lists for them and the dynamic loader, a static busybox (apt-get install
# busybox-static) for healthchecks and a shell, /etc/passwd and /etc/group with the rozone
# user (uid/gid 10001), /tmp, and /var/lib/rozone/{scm,om,datanode} owned by rozone. Both
# ways give the same layout (see Dockerfile and Dockerfile.scratch).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tag=rozone:dev
base=scratch
bin_dir=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}/release
busybox=${BUSYBOX:-}
# Shipped: the multi-call `rozone-daemons`, which the CLI's and every daemon's name link to
# (one copy of RocksDB and the Rust stack instead of five; daemons/src/main.rs).
bins=(rozone-daemons)
daemons=(rozone rozone-scm rozone-om rozone-datanode rozone-s3g)

die() {
    echo "build-image: $*" >&2
    exit 1
}

while [ $# -gt 0 ]; do
    case $1 in
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --base) base=${2:?--base needs an image}; shift 2 ;;
    --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift 2 ;;
    --busybox) busybox=${2:?--busybox needs a path}; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done

missing=()
for b in "${bins[@]}"; do
    [ -x "$bin_dir/$b" ] || missing+=("$bin_dir/$b")
done
if [ ${#missing[@]} -gt 0 ]; then
    how="cargo build --workspace --bins"
    case $bin_dir in
    */release) how="CARGO_TARGET_DIR=${bin_dir%/release} cargo build --release --workspace --bins" ;;
    */debug) how="CARGO_TARGET_DIR=${bin_dir%/debug} $how" ;;
    esac
    die "missing binaries: ${missing[*]}
build them first:  $how
(or point --bin-dir at the directory that holds ${bins[*]})"
fi
command -v strip >/dev/null || die "strip is not installed (apt-get install binutils)"
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"
# Without the buildx plugin, BuildKit cannot run: use the classic builder, which needs
# nothing beyond the engine.
if [ -z "${DOCKER_BUILDKIT:-}" ] && ! docker buildx version >/dev/null 2>&1; then
    export DOCKER_BUILDKIT=0
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/rozone-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
version=$(git -C "$here" describe --always --dirty 2>/dev/null || echo dev)

# Copies $1 to the same absolute path under $2, following symlinks.
copy_into() {
    mkdir -p "$2$(dirname "$1")"
    cp -L "$1" "$2$1"
}

# Every shared library (and the loader) `ldd` lists for $1, one path a line.
shared_libs() {
    local out
    out=$(ldd "$1" 2>&1) || {
        # A static binary needs nothing.
        grep -q 'not a dynamic executable\|statically linked' <<<"$out" && return 0
        die "ldd $1 failed: $out"
    }
    if grep -q 'not found' <<<"$out"; then
        die "$1 needs libraries this machine lacks: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"
    fi
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out"
}

# Each program's name as a link to rozone-daemons in directory $1.
link_daemons() {
    local d
    for d in "${daemons[@]}"; do ln -sf rozone-daemons "$1/$d"; done
}

assemble_rootfs() {
    local root=$ctx/rootfs lib
    mkdir -p "$root/usr/local/bin" "$root/bin" "$root/etc/rozone" "$root/tmp" "$ctx/data"
    for b in "${bins[@]}"; do
        strip -o "$root/usr/local/bin/$b" "$bin_dir/$b"
        for lib in $(shared_libs "$bin_dir/$b"); do
            [ -e "$root$lib" ] || copy_into "$lib" "$root"
        done
    done
    link_daemons "$root/usr/local/bin"
    # The loader may also be looked for under its canonical name (merged /usr): one copy
    # there, and the name the binaries ask for as a link to it.
    local canonical
    for lib in $(shared_libs "$bin_dir/rozone-daemons"); do
        case $lib in
        */ld-linux*)
            canonical=$(readlink -f "$lib")
            if [ "$canonical" != "$lib" ]; then
                copy_into "$canonical" "$root"
                ln -sf "$canonical" "$root$lib"
            fi
            ;;
        esac
    done

    if [ -z "$busybox" ]; then
        for candidate in /bin/busybox /usr/bin/busybox; do
            [ -x "$candidate" ] && busybox=$candidate && break
        done
    fi
    [ -n "$busybox" ] && [ -x "$busybox" ] ||
        die "no busybox found: apt-get install busybox-static (or pass --busybox PATH to a static one)"
    if ldd "$busybox" >/dev/null 2>&1; then
        die "$busybox is dynamically linked: install busybox-static (a static one runs in a scratch image)"
    fi
    cp "$busybox" "$root/bin/busybox"
    # Its applets as links (sh, wget, ls, ps, ...), for healthchecks and debugging.
    local applet
    for applet in $("$busybox" --list); do
        [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done

    cat >"$root/etc/passwd" <<'EOT'
root:x:0:0:root:/root:/bin/sh
rozone:x:10001:10001:rozone:/var/lib/rozone:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOT
    cat >"$root/etc/group" <<'EOT'
root:x:0:
rozone:x:10001:
nogroup:x:65534:
EOT
    # Service names of a compose network resolve through Docker's DNS; /etc/hosts first.
    echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
    mkdir -p "$ctx/data/scm" "$ctx/data/om" "$ctx/data/datanode" "$ctx/data/tls"
    cp "$here/Dockerfile.scratch" "$ctx/Dockerfile"
}

if [ "$base" = scratch ]; then
    assemble_rootfs
    echo "build-image: $tag FROM scratch ($(du -sh "$ctx/rootfs" | cut -f1) root filesystem)"
else
    mkdir -p "$ctx/bin"
    for b in "${bins[@]}"; do strip -o "$ctx/bin/$b" "$bin_dir/$b"; done
    link_daemons "$ctx/bin"
    cp "$here/Dockerfile" "$ctx/Dockerfile"
    echo "build-image: $tag FROM $base"
fi
if ! docker build --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version" \
    -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
    tail -n 20 "$ctx/build.log" >&2
    [ "$base" = scratch ] || die "docker build on $base failed (without a registry, leave out --base: FROM scratch)"
    die "docker build failed"
fi

# The image must run what it carries: each binary starts, and wget is there for healthchecks.
for b in "${daemons[@]}"; do
    docker run --rm --network none "$tag" "$b" --help >/dev/null ||
        die "$b does not run in $tag"
done
docker run --rm --network none "$tag" /bin/busybox wget --help >/dev/null 2>&1 ||
    die "busybox wget does not run in $tag"
echo "build-image: built $tag ($version): $(docker image inspect -f '{{.Size}}' "$tag" |
    awk '{printf "%.0f MB", $1 / 1e6}')"
