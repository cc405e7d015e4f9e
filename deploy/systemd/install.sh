#!/usr/bin/env bash
# Installs rozone for systemd on this host: the rozone system user, the binaries, example
# configs, the unit files, then `systemctl daemon-reload`. Starts nothing. See docs/deploy.md.
#
#   sudo deploy/systemd/install.sh                     release binaries from $CARGO_TARGET_DIR/release
#                                                      (cargo build --release --workspace --bins)
#   sudo deploy/systemd/install.sh --bin-dir DIR       binaries from DIR
#   deploy/systemd/install.sh --root /tmp/stage        into a staging tree (packaging, tests):
#                                                      no user created, no daemon-reload
#
# Never overwrites a config or env file that exists (the new example goes next to it as
# <name>.toml.example); binaries, units and docs are replaced.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin_dir=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}/release
root=
daemons=(scm om datanode s3g)
bins=(rozone rozone-scm rozone-om rozone-datanode rozone-s3g)

die() {
    echo "install: $*" >&2
    exit 1
}

while [ $# -gt 0 ]; do
    case $1 in
    --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift 2 ;;
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
strip_opt=()
command -v strip >/dev/null && strip_opt=(--strip)
[ -n "$root" ] || [ "$(id -u)" -eq 0 ] || die "run as root (or with --root DIR to stage the files)"
for b in "${bins[@]}"; do
    [ -x "$bin_dir/$b" ] ||
        die "missing $bin_dir/$b: build with  cargo build --release --workspace --bins  (or pass --bin-dir)"
done

if [ -z "$root" ]; then
    if ! getent group rozone >/dev/null; then
        groupadd --system rozone
    fi
    if ! getent passwd rozone >/dev/null; then
        useradd --system --gid rozone --home-dir /var/lib/rozone --no-create-home \
            --shell /usr/sbin/nologin --comment "rozone daemons" rozone
        echo "install: created system user rozone"
    fi
fi

install -d -m 0755 "$root/usr/local/bin" "$root/etc/systemd/system" \
    "$root/usr/local/share/doc/rozone/config"
install -d -m 0750 "$root/etc/rozone"
for b in "${bins[@]}"; do
    # Stripped: the release profile already strips; binaries from elsewhere may not be.
    install -m 0755 "${strip_opt[@]}" "$bin_dir/$b" "$root/usr/local/bin/$b"
done
for d in "${daemons[@]}"; do
    install -m 0644 "$here/rozone-$d.service" "$root/etc/systemd/system/rozone-$d.service"
    for f in "$d.toml:$repo/deploy/config/$d.toml" "$d.env:$here/$d.env"; do
        name=${f%%:*} src=${f#*:}
        if [ -e "$root/etc/rozone/$name" ]; then
            install -m 0640 "$src" "$root/etc/rozone/$name.example"
            echo "install: kept /etc/rozone/$name (new example: /etc/rozone/$name.example)"
        else
            install -m 0640 "$src" "$root/etc/rozone/$name"
        fi
    done
    [ -f "$repo/docs/config/$d.md" ] &&
        install -m 0644 "$repo/docs/config/$d.md" "$root/usr/local/share/doc/rozone/config/$d.md"
done
install -m 0644 "$repo/docs/deploy.md" "$root/usr/local/share/doc/rozone/deploy.md"
if [ -z "$root" ]; then
    # The daemons read their config as the rozone user; only root may change it.
    chown -R root:rozone /etc/rozone
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload
    else
        echo "install: systemd is not running here; run 'systemctl daemon-reload' on the target"
    fi
fi

cat <<EOF
install: installed rozone${root:+ under $root}.
Next:
  1. edit /etc/rozone/{scm,om,datanode}.toml: node.id, [[peers]] with every ring member's
     addresses, om.scm_addrs / datanode.scm_addrs (check: rozone-scm --config /etc/rozone/scm.toml --config-check)
  2. first SCM of a new cluster: ROZONE_SCM_ARGS=--init in /etc/rozone/scm.env, then
       systemctl enable --now rozone-scm
     each further SCM: ROZONE_SCM_ARGS=--bootstrap, then systemctl enable --now rozone-scm
  3. the same for the OMs (ROZONE_OM_ARGS=--init on the first, --bootstrap on the others),
     then systemctl enable --now rozone-datanode on every datanode host
  4. journalctl -u rozone-scm -f; curl http://127.0.0.1:9876/ready
  5. S3 gateway hosts: edit /etc/rozone/s3g.toml (s3g.om_addrs), then
       systemctl enable --now rozone-s3g
EOF
