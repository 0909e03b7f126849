#!/bin/bash
# Install the Debian 12 packages testbed needs; run as root.
#
# Idempotent: when everything is installed it changes nothing and needs no
# network; `apt-get update` runs only if a package is missing.  Services of
# newly installed packages are not started on this machine (the testbed runs
# its own sshd and NFS server inside namespaces).
set -euo pipefail

packages=(
    openssh-server openssh-client sudo procps
    nfs-kernel-server nfs-common nfs-ganesha nfs-ganesha-vfs libnfs-utils
    libnfs13 python3-fusepy fuse3
    e2fsprogs iproute2 util-linux mount iptables
    haproxy keepalived dpkg-dev shellcheck
    etcd-server etcd-client mariadb-server rabbitmq-server tinyproxy
    prometheus prometheus-alertmanager prometheus-blackbox-exporter
)

missing=()
for package in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$package")
done

# The test hosts have no network: the driver's real apt-get install of
# these inside a host is served from the runner's package cache. Debian's
# containerd and runc are not installed here, only downloaded: the
# testbed's signed apt repository (testbed/apt_repo.py) serves them to the
# hosts whose node preparation the install script runs.
offline=(nfs-common nfs-kernel-server containerd runc)
ensure_cached() {
    local package
    for package in "${offline[@]}"; do
        if ! compgen -G "/var/cache/apt/archives/${package}_*.deb" >/dev/null; then
            apt-get install -y -q --reinstall --download-only "${offline[@]}"
            return
        fi
    done
}

# kubectl (the real client the driver runs on the Masters) comes from the
# machine image's "kubectl" package.
command -v kubectl >/dev/null || missing+=(kubectl)

if ((${#missing[@]} == 0)); then
    echo "testbed dependencies already installed"
    ensure_cached
    exit 0
fi

if ((EUID != 0)); then
    echo "install-deps.sh: must run as root to install: ${missing[*]}" >&2
    exit 1
fi

# Keep postinst scripts from starting sshd/nfs services on this machine,
# unless the admin already has a policy in place.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
echo "installing: ${missing[*]}"
apt-get update -q
apt-get install -y -q -o Dpkg::Options::=--force-confold "${missing[@]}"
ensure_cached
