"""The shell scripts of a test host (testbed.hosts): the boot script
that starts it in its namespaces, and the script that builds the image
layer every host of a testbed starts from."""

# Runs inside fresh mount/PID/UTS/IPC namespaces.
# Usage: boot.sh ROOT UPPER WORK HOSTNAME [vdX=MAJOR:MINOR ...] -- COMMAND...
# HOSTNAME is the guest's host name, which cloud-init would set.
BOOT_SCRIPT = r'''set -e
R=$1 UPPER=$2 WORK=$3 NAME=$4
shift 4
mount -t overlay overlay -o "lowerdir=/,upperdir=$UPPER,workdir=$WORK" "$R"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount -t tmpfs -o mode=755,size=16m dev "$R/dev"
chardev() { mknod -m 666 "$R/dev/$1" c "$2" "$3"; }
chardev null 1 3; chardev zero 1 5; chardev full 1 7
chardev random 1 8; chardev urandom 1 9; chardev tty 5 0
mkdir "$R/dev/pts" "$R/dev/shm"
chmod 1777 "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 \
    devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"
ln -s /proc/self/fd/2 "$R/dev/stderr"
while [ "$1" != -- ]; do
    dev=${1%%=*} num=${1#*=}
    mknod -m 660 "$R/dev/$dev" b "${num%:*}" "${num#*:}"
    chgrp disk "$R/dev/$dev"
    shift
done
shift
mount -t tmpfs -o mode=755 run "$R/run"
mkdir -p "$R/run/sshd" "$R/run/lock"
chmod 1777 "$R/run/lock"
mount -t tmpfs -o mode=1777 tmp "$R/tmp"
hostname "$NAME"
exec chroot "$R" "$@"
'''

# Runs chrooted in the base layer; $1 = packages to purge (may be empty),
# $2 = directory of stand-in .debs to install (may be empty). The testbed's
# client key goes in later: the layer is kept for other testbeds.
BASE_SCRIPT = r'''set -e
useradd -m -s /bin/bash -G sudo ubuntu
# SHA-512 rather than the PAM default yescrypt, which is built to be
# slow: 15 ms of CPU for each of the suite's thousands of password logins.
echo ubuntu:ubuntu | chpasswd -c SHA512
install -d -m 700 -o ubuntu -g ubuntu /home/ubuntu/.ssh
echo "ubuntu ALL=(ALL) NOPASSWD:ALL" > /etc/sudoers.d/90-ubuntu
chmod 440 /etc/sudoers.d/90-ubuntu
printf 'PasswordAuthentication yes\nUseDNS no\n' \
    > /etc/ssh/sshd_config.d/50-testbed.conf
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A
rm -f /etc/resolv.conf
echo "nameserver 127.0.0.1" > /etc/resolv.conf
echo 'Acquire::Retries "0";' > /etc/apt/apt.conf.d/99testbed-offline
# Debian's user PATH lacks sbin (Ubuntu's has it); pam_env reads this.
echo 'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"' \
    > /etc/environment
# No man-db index rebuild after package changes: saves ~2 s per apt run.
rm -f /var/lib/man-db/auto-update
# apt keeps its binary package cache, as on a cloud image (the runner's
# container config turns it off, so every apt run would parse every list
# again: ~0.7 s of CPU per run, hundreds of runs per suite).
rm -f /etc/apt/apt.conf.d/docker-clean
# The package lists keep only what an offline host can install: the
# runner's installed packages and the .debs in its apt cache. Every apt-get
# run weighs each listed package against the installed set; with the full
# Debian lists (63,000 packages) that was ~0.6 s of CPU per run, and a
# suite makes some 900 runs (the whole suite is CPU-bound on 2 cores).
{ dpkg-query -W -f='${Package}\n'
  ls /var/cache/apt/archives | sed -n 's/_.*\.deb$//p'
} | sort -u > /tmp/installable
for list in /var/lib/apt/lists/*_Packages.*; do
    [ -e "$list" ] || continue
    /usr/lib/apt/apt-helper cat-file "$list" | awk '
        NR == FNR { installable[$0]; next }
        /^Package: / { keep = ($2 in installable) }
        keep' /tmp/installable - > "${list%.*}"
    rm "$list"
done
if [ -n "$1" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $1
fi
# kubeadm, kubelet and containerd stand-ins (testbed/standins), installed
# with dpkg so that dpkg-query reports them like a prepared node's.
if [ -n "$2" ]; then
    dpkg -i --force-unsafe-io "$2"/*.deb > /dev/null
    rm -rf "$2"
fi
'''
