#!/usr/bin/env bash
# Install a Kubernetes node with kubeadm, then create or join the cluster.
#
# Shipped with the sample VNF package. The management driver uploads it to
# every Master and Worker VM (Ubuntu 22.04, 24.04, 26.04, Debian 12 or 13)
# as /usr/local/lib/kubernetes-mgmt-pv/install_k8s_cluster.sh and runs it
# as root: `sudo bash install_k8s_cluster.sh ARGS`, on the first Master
# first (the others join with what it prints), then on the other Masters,
# then on the Workers. An operator may ship another script instead if it
# keeps this contract: the command line, the join secrets on standard
# input, the output block and the exit status below.
# It needs no apt-key (gone since apt 2.9: the repository is signed-by
# its own keyring), nor cgroup v1 (containerd and kubelet use systemd's
# cgroup driver, as on the cgroup v2 only systemd of 26.04 and 13).
#
# kubernetes-mgmt-pv-join-secrets: stdin
#   (This line tells the driver that the script reads the bootstrap token
#   and the certificate key from standard input. Without it the driver
#   passes them as -t TOKEN and -k KEY, the contract of earlier releases,
#   which any user of the node sees in `ps` while the script runs.)
#
# Usage:
#   First Master:  install_k8s_cluster.sh -m IP1[,IP2,...] -i HOST:PORT
#                      [-p POD_CIDR] [-a SERVICE_CIDR] [-e NAMES] [SOURCES]
#   Other Masters: install_k8s_cluster.sh -m IP1,IP2,... -i HOST:PORT
#                      -s sha256:HASH [-p ..] [-a ..] [SOURCES] < JOIN_SECRETS
#   Worker:        install_k8s_cluster.sh -w IP -i HOST:PORT
#                      -s sha256:HASH [SOURCES] < JOIN_SECRETS
#   SOURCES (air-gapped sites): [-r URL] [-g FILE] [-n FILE]
#                      [-M URL [-R NAMES]] [-P IMAGE]
#   Upgrade:       install_k8s_cluster.sh -U kubeadm|kubelet [-r URL] [-g FILE]
#
# Options:
#   -m IPS        Comma-separated addresses of all Masters. The Master that
#                 holds the first address runs `kubeadm init`; a Master
#                 holding another one joins as a control-plane node.
#   -w IP         Address of this Worker; it joins the cluster.
#                 Every node registers with its -m or -w address
#                 (KUBELET_EXTRA_ARGS=--node-ip in /etc/default/kubelet).
#   -i HOST:PORT  Control-plane endpoint: `<master>:6443` with one Master,
#                 `<VIP>:16443` with several (haproxy and keepalived are
#                 configured by the driver before this script runs; the
#                 script knows nothing about HA).
#   -p CIDR       Pod network (kubeadm --pod-network-cidr); only passed on
#                 when given. Calico uses 192.168.0.0/16 without it.
#   -a CIDR       Service network (kubeadm --service-cidr); only when given.
#   -e NAMES      Comma-separated extra IP addresses or DNS names for the
#                 API server certificate (kubeadm
#                 --apiserver-cert-extra-sans), e.g. the floating IP Tacker
#                 reaches the cluster at; used by the first Master's init.
#   -s HASH       sha256:<hex> hash of the cluster CA's public key, to join;
#                 required only when this node actually has to join: not on
#                 the first Master, not on a node that already has
#                 /etc/kubernetes/kubelet.conf.
#   -r URL        Kubernetes apt repository (a flat repository laid out
#                 like pkgs.k8s.io's, e.g. an internal mirror of it);
#                 default https://pkgs.k8s.io/core:/stable:/K8S_MINOR/deb/.
#   -g FILE       Its signing key (ASCII-armored), a file on this node.
#                 Without it the key is downloaded from URL/Release.key.
#   -n FILE       CNI manifest applied after `kubeadm init`, a file on
#                 this node, instead of downloading the Calico manifest.
#   -M URL        Container registry mirror: containerd pulls the images
#                 of the -R registries from it first (hosts.toml in
#                 /etc/containerd/certs.d/<registry>/).
#   -R NAMES      Comma-separated registries -M mirrors; default
#                 registry.k8s.io,docker.io,quay.io. Only with -M.
#   -P IMAGE      Pause (sandbox) image of containerd; default
#                 PAUSE_IMAGE.
#                 -r, -g, -M, -R and -P take effect while the node is
#                 prepared (step 1); a prepared node keeps its sources.
#   -U STAGE      Upgrade this node's packages to K8S_PACKAGE_VERSION, a
#                 node of a cluster one minor older (the management driver
#                 runs `kubeadm upgrade apply|node` and the drain between
#                 the stages): `kubeadm` points the Kubernetes apt
#                 repository at this minor's (-r, -g as in step 1) and
#                 installs kubeadm; `kubelet` installs kubelet and kubectl
#                 and restarts the kubelet. Each package is unheld, set to
#                 exactly K8S_PACKAGE_VERSION and held again; the new
#                 versions are printed. -m, -w and -i are not used.
#   -o FILE       Also append the output to FILE (created 0600). The
#                 cluster info block is not written to it.
#   -d            Trace every command (set -x) on stderr. The trace shows
#                 the token and the certificate key: debugging only.
#   -h            Show this help.
#
# Join secrets: a node that has to join reads them from standard input,
# never from its command line, one per line:
#   token=<bootstrap token>
#   certificate_key=<certificate key>     (Masters only)
# A node that does not join does not read standard input.
#
# Environment:
#   http_proxy, https_proxy, no_proxy
#       When set, exported to apt-get, curl and kubeadm (kubeadm init and
#       join, which copy them into the static Pod manifests, do not get a
#       proxy URL with user@); while the node is prepared they are also
#       written for containerd (image pulls) and kubelet to http-proxy.env
#       (root only) named by the systemd drop-in http-proxy.conf, in
#       /etc/systemd/system/containerd.service.d and kubelet.service.d.
#       When a proxy is set, no_proxy is extended with localhost, the
#       Master addresses, the endpoint host, this node and the pod and
#       service networks.
#
# What it does:
#   1. Node preparation: swap off, kernel modules overlay and br_netfilter,
#      forwarding sysctls; the Kubernetes apt repository (-r, key -g) in
#      /etc/apt/sources.list.d/kubernetes.list, checked with an
#      `apt-get update` of that repository alone that fails on any error
#      (a wrong key, an unreachable mirror) before anything is installed,
#      and removed again when it fails; containerd (from any configured
#      repository, the distribution's or -r's) with the systemd cgroup
#      driver, the pause image -P and the registry mirror -M;
#      kubelet/kubeadm/kubectl K8S_PACKAGE_VERSION (held). SKIPPED when
#      dpkg reports kubelet and kubeadm installed at exactly
#      K8S_PACKAGE_VERSION and the commands containerd and kubectl exist.
#   2. Always writes /etc/default/kubelet (KUBELET_EXTRA_ARGS=--node-ip=IP).
#   3. Unless /etc/kubernetes/kubelet.conf exists (the node is already a
#      member, it is not initialised or joined again):
#        kubeadm init --control-plane-endpoint HOST:PORT
#            --apiserver-advertise-address IP [--pod-network-cidr CIDR]
#            [--service-cidr CIDR] [--apiserver-cert-extra-sans NAMES]
#            --upload-certs
#        (then the network add-on is applied: -n's manifest, or Calico
#        CALICO_VERSION's), or
#        kubeadm join --config FILE
#      where FILE is a JoinConfiguration (kubeadm.k8s.io/v1beta4) with
#      discovery.bootstrapToken (apiServerEndpoint HOST:PORT, token,
#      caCertHashes [H]) and, on a Master, controlPlane (localAPIEndpoint
#      advertiseAddress IP, certificateKey). FILE is created 0600 in /run
#      and removed when kubeadm join returns or the script exits.
#      Without -n, the Calico manifest is downloaded before `kubeadm init`
#      to /usr/local/lib/kubernetes-mgmt-pv/calico-CALICO_VERSION.yaml; a
#      file already there (an offline image) is used as it is.
#      /usr/local/lib/kubernetes-mgmt-pv/network-add-on-pending exists from
#      just before `kubeadm init` until the add-on is applied: a Master
#      that is a member and has it applies the add-on (a run stopped in
#      between); a node that joins removes it.
#   4. On a Master: copies /etc/kubernetes/admin.conf to ~/.kube/config of
#      SUDO_USER (0600, owned by that user) and prints the block below.
#
# Output: every Master (after init, join, or when already a member) prints
# on stdout, one value per line, in this order:
#   ----- BEGIN KUBERNETES CLUSTER INFO -----
#   server=https://HOST:PORT
#   token=<bootstrap token from `kubeadm token create --ttl 2h`>
#   ca_cert_hash=sha256:<hex sha256 of the CA's DER SubjectPublicKeyInfo>
#   certificate_key=<hex, last line of
#                    `kubeadm init phase upload-certs --upload-certs`>
#   ca_cert=<base64 of /etc/kubernetes/pki/ca.crt (PEM), one line>
#   ----- END KUBERNETES CLUSTER INFO -----
# The token and the certificate key appear nowhere else (kubeadm's own
# output is shown with them masked, no command line carries them), unless
# -d is given.
#
# Exit status: 0 on success; 2 on a usage error (the message names the
# option; the node is left untouched); otherwise the failing command's
# status, with the last line on stderr reading
#   install_k8s_cluster.sh: FAILED: <command> (exit <n>)
# Re-running after a failure or on a finished node is safe.

set -euo pipefail
set -o errtrace           # the ERR trap fires inside functions too
shopt -s inherit_errexit  # and -e holds inside $(...)

# The Kubernetes version: the ONE setting to change for another release.
# pkgs.k8s.io has one repository per minor version (K8S_MINOR, derived
# from it); its package versions are <version>-<revision>.
readonly K8S_PACKAGE_VERSION='1.36.4-1.1'
readonly K8S_VERSION="${K8S_PACKAGE_VERSION%%-*}"  # 1.36.4
readonly K8S_MINOR="v${K8S_VERSION%.*}"              # v1.36
readonly PAUSE_IMAGE='registry.k8s.io/pause:3.10.1'
readonly CALICO_VERSION='v3.28.2'
readonly CALICO_URL="https://raw.githubusercontent.com/projectcalico/calico/${CALICO_VERSION}/manifests/calico.yaml"
readonly K8S_REPO="https://pkgs.k8s.io/core:/stable:/${K8S_MINOR}/deb/"
readonly MIRRORED_REGISTRIES='registry.k8s.io,docker.io,quay.io'
readonly SCRIPT_NAME='install_k8s_cluster.sh'

# Files read or written outside node preparation. Set here, so neither the
# command line nor the environment can change them; plain variables so
# that the unit tests, which source this file and call its functions, can
# point them into a temporary directory.
KUBE_DIR='/etc/kubernetes'
KUBELET_DEFAULTS='/etc/default/kubelet'
SYSTEMD_DIR='/etc/systemd/system'
LIB_DIR='/usr/local/lib/kubernetes-mgmt-pv'
RUN_DIR='/run'
APT_DIR='/etc/apt'
CONTAINERD_DIR='/etc/containerd'

# --- errors ----------------------------------------------------------------

fail() {  # fail WHAT STATUS: the contract's last stderr line, then exit.
    printf '%s: FAILED: %s (exit %d)\n' "$SCRIPT_NAME" "$1" "$2" >&2
    exit "$2"
}

on_error() {
    local status=$? command=$BASH_COMMAND
    if [ "$BASH_SUBSHELL" -gt 0 ]; then
        exit "$status"  # the shell that started the subshell reports it
    fi
    fail "$command" "$status"
}
trap on_error ERR

fail_usage() {
    printf '%s: %s\n' "$SCRIPT_NAME" "$1" >&2
    printf 'Run %s -h for help.\n' "$SCRIPT_NAME" >&2
    exit 2
}

usage() {
    sed -n '/^# Usage:/,/^# Re-running/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

# --- command line ------------------------------------------------------------

masters='' worker='' endpoint='' pod_cidr='' service_cidr='' extra_sans=''
token='' ca_hash='' cert_key='' log_file='' debug='' join_config=''
master_list=() node_ip='' role='' member=''
k8s_repo="$K8S_REPO" apt_key='' cni_manifest='' registry_mirror=''
mirrored_registries='' sandbox_image="$PAUSE_IMAGE" addon_manifest=''
upgrade_stage=''

readonly IP_RE='^[0-9A-Fa-f.:]+$'
readonly CIDR_RE='^[0-9A-Fa-f.:/]+(,[0-9A-Fa-f.:/]+)?$'
readonly ENDPOINT_RE='^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$'
readonly TOKEN_RE='^[a-z0-9]{6}\.[a-z0-9]{16}$'
readonly HASH_RE='^sha256:[0-9a-f]{64}$'
readonly KEY_RE='^[0-9a-f]+$'
readonly SANS_RE='^[A-Za-z0-9.:-]+(,[A-Za-z0-9.:-]+)*$'
# No quote, space or backslash: URLs and images go into apt's and
# containerd's configuration files.
readonly URL_RE='^https?://[]A-Za-z0-9._~:/?#@!$&()*+,;=%[-]+$'
readonly REGISTRIES_RE='^[A-Za-z0-9.-]+(:[0-9]+)?(,[A-Za-z0-9.-]+(:[0-9]+)?)*$'
readonly IMAGE_RE='^[A-Za-z0-9][A-Za-z0-9._/:@-]*$'

parse_options() {
    local option address
    OPTIND=1
    while getopts ':m:w:i:p:a:e:s:r:g:n:M:R:P:U:o:dh' option; do
        case "$option" in
            m) masters="$OPTARG" ;;
            w) worker="$OPTARG" ;;
            i) endpoint="$OPTARG" ;;
            p) pod_cidr="$OPTARG" ;;
            a) service_cidr="$OPTARG" ;;
            e) extra_sans="$OPTARG" ;;
            s) ca_hash="$OPTARG" ;;
            r) k8s_repo="$OPTARG" ;;
            g) apt_key="$OPTARG" ;;
            n) cni_manifest="$OPTARG" ;;
            M) registry_mirror="$OPTARG" ;;
            R) mirrored_registries="$OPTARG" ;;
            P) sandbox_image="$OPTARG" ;;
            U) upgrade_stage="$OPTARG" ;;
            o) log_file="$OPTARG" ;;
            d) debug=1 ;;
            h) usage; exit 0 ;;
            :) fail_usage "option -$OPTARG needs an argument" ;;
            *) fail_usage "unknown option -$OPTARG" ;;
        esac
    done
    shift $((OPTIND - 1))
    [ "$#" -eq 0 ] || fail_usage "unexpected argument '$1'"
    if [ -n "$upgrade_stage" ]; then
        case "$upgrade_stage" in
            kubeadm|kubelet) ;;
            *) fail_usage "-U: '$upgrade_stage' is neither kubeadm nor kubelet" ;;
        esac
        check_source_options
        return 0
    fi

    [ -n "$endpoint" ] || fail_usage '-i HOST:PORT is required'
    [[ "$endpoint" =~ $ENDPOINT_RE ]] ||
        fail_usage "-i: '$endpoint' is not HOST:PORT"
    if [ -n "$masters" ] && [ -n "$worker" ]; then
        fail_usage '-m and -w cannot be used together'
    fi
    if [ -z "$masters" ] && [ -z "$worker" ]; then
        fail_usage '-m IPS (Master) or -w IP (Worker) is required'
    fi
    if [ -n "$masters" ]; then
        IFS=',' read -r -a master_list <<< "$masters"
        [ "${masters: -1}" != ',' ] || fail_usage "-m: empty address in '$masters'"
        for address in "${master_list[@]}"; do
            [[ "$address" =~ $IP_RE ]] ||
                fail_usage "-m: '$address' is not an IP address"
        done
    else
        [[ "$worker" =~ $IP_RE ]] ||
            fail_usage "-w: '$worker' is not an IP address"
    fi
    if [ -n "$pod_cidr" ] && ! [[ "$pod_cidr" =~ $CIDR_RE ]]; then
        fail_usage "-p: '$pod_cidr' is not a CIDR"
    fi
    if [ -n "$service_cidr" ] && ! [[ "$service_cidr" =~ $CIDR_RE ]]; then
        fail_usage "-a: '$service_cidr' is not a CIDR"
    fi
    if [ -n "$extra_sans" ] && ! [[ "$extra_sans" =~ $SANS_RE ]]; then
        fail_usage "-e: '$extra_sans' is not a list of addresses and names"
    fi
    if [ -n "$ca_hash" ] && ! [[ "$ca_hash" =~ $HASH_RE ]]; then
        fail_usage '-s: not sha256:<64 hex digits>'
    fi
    check_source_options
    local name value
    for name in http_proxy https_proxy no_proxy; do
        value="${!name:-}"
        [[ "$value" != *$'\n'* && "$value" != *'"'* ]] ||
            fail_usage "environment variable $name holds a newline or a quote"
    done
}

check_source_options() {
    [[ "$k8s_repo" =~ $URL_RE ]] ||
        fail_usage "-r: '$k8s_repo' is not an http:// or https:// URL"
    k8s_repo="${k8s_repo%/}/"
    local option file
    for option in "g:$apt_key" "n:$cni_manifest"; do
        file="${option#*:}"
        if [ -n "$file" ] && { [ ! -f "$file" ] || [ ! -r "$file" ]; }; then
            fail_usage "-${option%%:*}: $file is not a readable file"
        fi
    done
    if [ -n "$registry_mirror" ] && ! [[ "$registry_mirror" =~ $URL_RE ]]; then
        fail_usage "-M: '$registry_mirror' is not an http:// or https:// URL"
    fi
    if [ -n "$mirrored_registries" ]; then
        [ -n "$registry_mirror" ] || fail_usage '-R needs -M URL'
        [[ "$mirrored_registries" =~ $REGISTRIES_RE ]] ||
            fail_usage "-R: '$mirrored_registries' is not a list of registries"
    fi
    mirrored_registries="${mirrored_registries:-$MIRRORED_REGISTRIES}"
    [[ "$sandbox_image" =~ $IMAGE_RE ]] ||
        fail_usage "-P: '$sandbox_image' is not an image reference"
}

# Sets node_ip to the first of the given addresses that this host holds,
# or to nothing.
find_node_ip() {
    local addresses candidate
    addresses="$(ip -o addr show)" || fail 'ip -o addr show' "$?"
    node_ip=''
    for candidate in "$@"; do
        if [[ "$addresses" == *" $candidate/"* ]]; then
            node_ip="$candidate"
            return 0
        fi
    done
}

# Sets token and cert_key from the lines on standard input; checks them
# without ever echoing them.
read_join_secrets() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in
            token=*) token="${line#token=}" ;;
            certificate_key=*) cert_key="${line#certificate_key=}" ;;
            '') ;;
            *) fail_usage 'standard input: a line is neither token=... nor certificate_key=...' ;;
        esac
    done
    if [ -n "$token" ] && ! [[ "$token" =~ $TOKEN_RE ]]; then
        fail_usage 'standard input: token is not a bootstrap token ([a-z0-9]{6}.[a-z0-9]{16})'
    fi
    if [ -n "$cert_key" ] && ! [[ "$cert_key" =~ $KEY_RE ]]; then
        fail_usage 'standard input: certificate_key is not hexadecimal'
    fi
}

# Sets node_ip, role (first-master, master, worker) and member; reads and
# checks what a join needs.
find_role() {
    if [ -n "$masters" ]; then
        find_node_ip "${master_list[@]}"
        [ -n "$node_ip" ] ||
            fail_usage "-m: none of $masters is an address of this host"
        if [ "$node_ip" = "${master_list[0]}" ]; then
            role='first-master'
        else
            role='master'
        fi
    else
        find_node_ip "$worker"
        [ -n "$node_ip" ] ||
            fail_usage "-w: $worker is not an address of this host"
        role='worker'
    fi
    if [ -f "$KUBE_DIR/kubelet.conf" ]; then
        member=1
    elif [ "$role" != 'first-master' ]; then
        [ -n "$ca_hash" ] || fail_usage "-s sha256:HASH is required to join (this $role is not a member yet)"
        read_join_secrets
        [ -n "$token" ] || fail_usage "standard input: token=TOKEN is required to join (this $role is not a member yet)"
        if [ "$role" = 'master' ] && [ -z "$cert_key" ]; then
            fail_usage 'standard input: certificate_key=KEY is required to join as a control-plane node'
        fi
        if [ "$role" = 'worker' ] && [ -n "$cert_key" ]; then
            fail_usage 'standard input: certificate_key is for Masters only'
        fi
    fi
}

# --- proxy ---------------------------------------------------------------------

# Exports the proxy variables that are set; when a proxy is set, no_proxy
# also lists the cluster's own addresses, so that kubeadm, kubelet and
# containerd reach the API servers directly.
export_proxy_environment() {
    if [ -z "${http_proxy:-}${https_proxy:-}" ]; then
        if [ -n "${no_proxy:-}" ]; then export no_proxy; fi
        return 0
    fi
    local host="${endpoint%:*}" extra
    host="${host#[}"
    host="${host%]}"
    extra="localhost,127.0.0.1,${masters:-$worker},${host},${node_ip}"
    [ -z "$pod_cidr" ] || extra+=",${pod_cidr}"
    [ -z "$service_cidr" ] || extra+=",${service_cidr}"
    no_proxy="${no_proxy:+${no_proxy},}${extra},.svc,.cluster.local"
    export no_proxy
    if [ -n "${http_proxy:-}" ]; then export http_proxy; fi
    if [ -n "${https_proxy:-}" ]; then export https_proxy; fi
}

# A double-quoted value of a systemd EnvironmentFile= (quotes are refused
# by check_options): \ $ and ` are escaped.
env_file_quote() {
    local value="${1//\\/\\\\}"
    value="${value//\$/\\\$}"
    printf '"%s"' "${value//\`/\\\`}"
}

# Writes the proxy variables that are set for containerd and kubelet, when
# one is: <unit>.d/http-proxy.env (root only, mode 0600) and the drop-in
# <unit>.d/http-proxy.conf that names it. Not Environment= lines: any user
# reads those over D-Bus (`systemctl show -p Environment`), with the
# proxy's user name and password.
write_proxy_dropins() {
    local unit lines='' name upper value
    for name in http_proxy https_proxy no_proxy; do
        value="${!name:-}"
        [ -n "$value" ] || continue
        upper="${name^^}"
        lines+="${upper}=$(env_file_quote "$value")"$'\n'
    done
    [ -n "$lines" ] || return 0
    for unit in containerd kubelet; do
        mkdir -p "$SYSTEMD_DIR/$unit.service.d"
        (umask 077
         printf '%s' "$lines" > "$SYSTEMD_DIR/$unit.service.d/http-proxy.env"
         printf '[Service]\nEnvironmentFile=%s\n' \
             "$SYSTEMD_DIR/$unit.service.d/http-proxy.env" \
             > "$SYSTEMD_DIR/$unit.service.d/http-proxy.conf")
    done
}

# Whether a proxy URL carries a user name (and password): user@host.
has_credentials() {
    [[ "$1" =~ ^([A-Za-z][A-Za-z0-9+.-]*://)?[^/@]*@ ]]
}

# kubeadm without a proxy variable that holds credentials: kubeadm copies
# its *_proxy variables into the static Pod manifests of the control
# plane, which anyone allowed to read kube-system's Pods sees. A subshell:
# the script keeps its variables.
kubeadm_without_proxy_credentials() (
    for name in http_proxy https_proxy; do
        if has_credentials "${!name:-}"; then
            unset "$name"
        fi
    done
    kubeadm "$@"
)

# --- node preparation ------------------------------------------------------

# "installed <version>" for an installed package, else something else.
package_state() {
    dpkg-query -W -f="\${db:Status-Status} \${Version}" "$1" 2>/dev/null || true
}

# True when the node was already prepared (by this script or in the image).
node_prepared() {
    [ "$(package_state kubelet)" = "installed ${K8S_PACKAGE_VERSION}" ] &&
        [ "$(package_state kubeadm)" = "installed ${K8S_PACKAGE_VERSION}" ] &&
        command -v containerd > /dev/null &&
        command -v kubectl > /dev/null
}

readonly APT_OPTIONS=(-y -q -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

prepare_kernel() {
    swapoff -a
    sed -i -E 's|^([^#].*[[:space:]]swap[[:space:]].*)$|# \1|' /etc/fstab
    printf 'overlay\nbr_netfilter\n' > /etc/modules-load.d/kubernetes.conf
    modprobe overlay
    modprobe br_netfilter
    printf '%s\n' 'net.bridge.bridge-nf-call-iptables = 1' \
        'net.bridge.bridge-nf-call-ip6tables = 1' 'net.ipv4.ip_forward = 1' \
        > /etc/sysctl.d/90-kubernetes.conf
    sysctl --system > /dev/null
}

# The Kubernetes repository alone, where any error is one: a wrong key or
# an unreachable mirror stops the preparation here, naming the URL, before
# anything is installed; the list is removed again, so that later
# `apt-get update` runs do not trip over it.
add_kubernetes_repository() {
    local keyring="$APT_DIR/keyrings/kubernetes-apt-keyring.asc"
    local list="$APT_DIR/sources.list.d/kubernetes.list" status=0
    install -d -m 755 "$APT_DIR/keyrings" "$APT_DIR/sources.list.d"
    if [ -n "$apt_key" ]; then
        install -m 644 "$apt_key" "${keyring}.new"
    else
        curl -fsSL --retry 3 -o "${keyring}.new" "${k8s_repo}Release.key" ||
            fail "curl ${k8s_repo}Release.key" "$?"
    fi
    chmod 644 "${keyring}.new"
    mv "${keyring}.new" "$keyring"
    echo "deb [signed-by=${keyring}] ${k8s_repo} /" > "$list"
    apt-get update -q -o Dir::Etc::SourceList="$list" \
        -o Dir::Etc::SourceParts=- -o APT::Get::List-Cleanup=0 \
        -o APT::Update::Error-Mode=any || status=$?
    if [ "$status" -ne 0 ]; then
        rm -f "$list"
        fail "apt-get update of the Kubernetes apt repository ${k8s_repo}" \
            "$status"
    fi
}

# containerd's own default configuration with the systemd cgroup driver,
# the pause image and, with a mirror, its hosts.toml directory. Both of
# its formats: containerd 1.x's (version = 2; Debian 12 and 13, Ubuntu
# 22.04 and 24.04) and 2.x's (version = 3; Ubuntu 26.04), which names
# the pause image `sandbox` (pinned_images), quotes with ' and prints no
# SystemdCgroup key: it is set in the runc options table of either.
configure_containerd() {
    local config="$CONTAINERD_DIR/config.toml" certs="$CONTAINERD_DIR/certs.d"
    mkdir -p "$CONTAINERD_DIR"
    containerd config default > "${config}.new"
    sed -i -e '/^[[:space:]]*SystemdCgroup = /d' \
        -e '/\.containerd\.runtimes\.runc\.options\]$/a SystemdCgroup = true' \
        -e "s|^\\([[:space:]]*sandbox\\(_image\\)\\{0,1\\} = \\).*|\\1\"${sandbox_image}\"|" \
        "${config}.new"
    if [ -n "$registry_mirror" ]; then
        sed -i -e "s|^\\([[:space:]]*config_path = \\).*|\\1\"${certs}\"|" \
            "${config}.new"
        grep -qF "config_path = \"${certs}\"" "${config}.new" ||
            fail 'containerd config default: no registry config_path to set' 1
        write_registry_hosts "$certs"
    fi
    grep -q '^SystemdCgroup = true$' "${config}.new" ||
        fail 'containerd config default: no runc options to enable SystemdCgroup in' 1
    grep -qF -e "sandbox_image = \"${sandbox_image}\"" \
        -e "sandbox = \"${sandbox_image}\"" "${config}.new" ||
        fail 'containerd config default: no sandbox_image or sandbox setting' 1
    mv "${config}.new" "$config"
}

# CERTS/<registry>/hosts.toml for each mirrored registry: pulls go to the
# mirror first, then to the registry itself.
write_registry_hosts() {
    local registry server registries=()
    IFS=',' read -r -a registries <<< "$mirrored_registries"
    for registry in "${registries[@]}"; do
        server="https://${registry}"
        [ "$registry" != 'docker.io' ] || server='https://registry-1.docker.io'
        mkdir -p "$1/$registry"
        printf '%s\n' "server = \"${server}\"" '' \
            "[host.\"${registry_mirror}\"]" \
            '  capabilities = ["pull", "resolve"]' > "$1/$registry/hosts.toml"
    done
}

install_packages() {
    apt-get install "${APT_OPTIONS[@]}" --allow-change-held-packages \
        --allow-downgrades containerd "kubelet=${K8S_PACKAGE_VERSION}" \
        "kubeadm=${K8S_PACKAGE_VERSION}" "kubectl=${K8S_PACKAGE_VERSION}"
    apt-mark hold kubelet kubeadm kubectl
}

# upgrade_packages NAME...: each at exactly K8S_PACKAGE_VERSION, held
# (as install_packages, whatever version another source installed).
upgrade_packages() {
    local name versions=()
    for name in "$@"; do
        versions+=("${name}=${K8S_PACKAGE_VERSION}")
    done
    apt-mark unhold "$@" > /dev/null
    apt-get install "${APT_OPTIONS[@]}" --allow-change-held-packages \
        --allow-downgrades "${versions[@]}"
    apt-mark hold "$@"
}

# -U: one stage of the upgrade of a member to this script's minor.
upgrade_node() {
    export DEBIAN_FRONTEND=noninteractive
    if [ "$upgrade_stage" = 'kubeadm' ]; then
        add_kubernetes_repository
        upgrade_packages kubeadm
        echo "kubeadm $(kubeadm version -o short)"
    else
        upgrade_packages kubelet kubectl
        if [ -d /run/systemd/system ]; then
            systemctl daemon-reload
        fi
        restart_kubelet
        echo "kubelet $(kubelet --version)"
        echo "kubectl $(kubectl version --client -o json |
            sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
    fi
    echo 'Upgrade Success!'
}

prepare_node() {
    export DEBIAN_FRONTEND=noninteractive
    prepare_kernel
    apt-get update -q
    apt-get install "${APT_OPTIONS[@]}" ca-certificates curl
    add_kubernetes_repository
    install_packages
    configure_containerd
    write_proxy_dropins
    systemctl daemon-reload
    systemctl enable containerd kubelet
    systemctl restart containerd
}

# --- kubelet node address ----------------------------------------------------

restart_kubelet() {
    if [ -d /run/systemd/system ]; then
        systemctl restart kubelet
    fi
}

# Always written; a member whose address changed restarts its kubelet.
write_kubelet_defaults() {
    local line="KUBELET_EXTRA_ARGS=--node-ip=${node_ip}"
    if [ -f "$KUBELET_DEFAULTS" ] &&
            [ "$(cat "$KUBELET_DEFAULTS")" = "$line" ]; then
        return 0
    fi
    printf '%s\n' "$line" > "$KUBELET_DEFAULTS"
    if [ -n "$member" ]; then
        restart_kubelet
    fi
}

# --- init / join -----------------------------------------------------------

# kubeadm prints bootstrap tokens and certificate keys: mask them.
redact() {
    sed -u -E -e 's/[a-z0-9]{6}\.[a-z0-9]{16}/<token>/g' \
        -e 's/(--certificate-key[ =]+)[0-9A-Fa-f]+/\1<certificate-key>/g' \
        -e 's/^([[:space:]]*)[0-9a-f]{64}[[:space:]]*$/\1<certificate-key>/'
}

# run_masked WHAT COMMAND...: runs COMMAND with its stdout and stderr each
# passed through redact; fails as WHAT. The saved stdout is not inherited.
run_masked() {
    local what="$1" status=0
    shift
    { "$@" 2>&1 1>&3 3>&- {stdout_fd}>&- | redact >&2; } 3>&1 | redact ||
        status=$?
    [ "$status" -eq 0 ] || fail "$what" "$status"
}

calico_manifest() {
    echo "${LIB_DIR}/calico-${CALICO_VERSION}.yaml"
}

# Fetched before `kubeadm init`, so that a network failure happens before
# the cluster exists; a manifest already in place (offline image) is used.
fetch_calico_manifest() {
    local manifest
    manifest="$(calico_manifest)"
    [ ! -s "$manifest" ] || return 0
    mkdir -p "$LIB_DIR"
    curl -fsSL --retry 3 -o "${manifest}.part" "$CALICO_URL" ||
        fail "curl $CALICO_URL" "$?"
    mv "${manifest}.part" "$manifest"
}

# Exists from just before `kubeadm init` until the network add-on is
# applied: a re-run on the member that init made finds it and applies the
# add-on that an interrupted run left out.
addon_pending_marker() {
    echo "${LIB_DIR}/network-add-on-pending"
}

# The network add-on's manifest (-n's, or Calico's, downloaded when
# missing) in addon_manifest: a variable, so that a failed download
# reports its own FAILED line.
find_addon_manifest() {
    addon_manifest="$cni_manifest"
    if [ -z "$addon_manifest" ]; then
        fetch_calico_manifest
        addon_manifest="$(calico_manifest)"
    fi
}

apply_network_addon() {
    kubectl --kubeconfig "$KUBE_DIR/admin.conf" apply -f "$addon_manifest" ||
        fail "kubectl apply -f $addon_manifest" "$?"
    rm -f -- "$(addon_pending_marker)"
}

create_cluster() {
    local args=(--control-plane-endpoint "$endpoint"
                --apiserver-advertise-address "$node_ip")
    [ -z "$pod_cidr" ] || args+=(--pod-network-cidr "$pod_cidr")
    [ -z "$service_cidr" ] || args+=(--service-cidr "$service_cidr")
    [ -z "$extra_sans" ] || args+=(--apiserver-cert-extra-sans "$extra_sans")
    args+=(--upload-certs)
    find_addon_manifest
    mkdir -p "$LIB_DIR"
    : > "$(addon_pending_marker)"
    run_masked 'kubeadm init' kubeadm_without_proxy_credentials init \
        "${args[@]}"
    apply_network_addon
}

# A member whose own `kubeadm init` ran but whose network add-on was
# never applied (the run stopped in between) gets it now.
finish_network_addon() {
    if [ "$role" != 'worker' ] && [ -e "$(addon_pending_marker)" ]; then
        echo "kubeadm init ran here, but the network add-on was not" \
            "applied: applying it now."
        find_addon_manifest
        apply_network_addon
    fi
}

# The JoinConfiguration of this node, with the secrets: kubeadm takes them
# from a file, so no command line carries them (printf is a builtin).
write_join_config() {
    printf '%s\n' 'apiVersion: kubeadm.k8s.io/v1beta4' \
        'kind: JoinConfiguration' 'discovery:' '  bootstrapToken:' \
        "    apiServerEndpoint: \"${endpoint}\"" "    token: \"${token}\"" \
        '    caCertHashes:' "    - \"${ca_hash}\""
    if [ "$role" = 'master' ]; then
        printf '%s\n' 'controlPlane:' '  localAPIEndpoint:' \
            "    advertiseAddress: \"${node_ip}\"" \
            "  certificateKey: \"${cert_key}\""
    fi
}

remove_join_config() {
    if [ -n "$join_config" ]; then
        rm -f -- "$join_config"
        join_config=''
    fi
}
trap remove_join_config EXIT  # a failure or a signal too

join_cluster() {
    # An add-on left pending by an init here belongs to a cluster that
    # kubeadm reset has left.
    rm -f -- "$(addon_pending_marker)"
    join_config="$(umask 077; mktemp "$RUN_DIR/kubeadm-join.XXXXXXXX")" ||
        fail "mktemp $RUN_DIR/kubeadm-join.XXXXXXXX" "$?"
    write_join_config > "$join_config"
    run_masked 'kubeadm join' kubeadm_without_proxy_credentials join \
        --config "$join_config"
    remove_join_config
}

# --- Master outputs ------------------------------------------------------------

copy_admin_kubeconfig() {
    local user="${SUDO_USER:-}" entry uid gid home
    if [ -z "$user" ] || [ "$user" = 'root' ]; then
        echo "No SUDO_USER: $KUBE_DIR/admin.conf not copied to ~/.kube/config."
        return 0
    fi
    entry="$(getent passwd "$user")" || fail "getent passwd $user" "$?"
    IFS=':' read -r _ _ uid gid _ home _ <<< "$entry"
    install -d -m 700 -o "$uid" -g "$gid" "$home/.kube"
    install -m 600 -o "$uid" -g "$gid" "$KUBE_DIR/admin.conf" \
        "$home/.kube/config"
    echo "Copied $KUBE_DIR/admin.conf to $home/.kube/config."
}

print_cluster_info() {
    local ca="$KUBE_DIR/pki/ca.crt" new_token output new_key digest ca_b64
    new_token="$(kubeadm token create --ttl 2h)" ||
        fail 'kubeadm token create --ttl 2h' "$?"
    [[ "$new_token" =~ $TOKEN_RE ]] ||
        fail 'kubeadm token create --ttl 2h: no bootstrap token printed' 1
    output="$(kubeadm init phase upload-certs --upload-certs)" ||
        fail 'kubeadm init phase upload-certs --upload-certs' "$?"
    new_key="${output##*$'\n'}"
    [[ "$new_key" =~ $KEY_RE ]] ||
        fail 'kubeadm init phase upload-certs: last line is no certificate key' 1
    digest="$(openssl x509 -pubkey -noout -in "$ca" |
        openssl pkey -pubin -outform der | sha256sum)" ||
        fail "openssl: public key hash of $ca" "$?"
    digest="${digest%% *}"
    ca_b64="$(base64 -w0 "$ca")" || fail "base64 -w0 $ca" "$?"
    printf '%s\n' '----- BEGIN KUBERNETES CLUSTER INFO -----' \
        "server=https://${endpoint}" "token=${new_token}" \
        "ca_cert_hash=sha256:${digest}" "certificate_key=${new_key}" \
        "ca_cert=${ca_b64}" '----- END KUBERNETES CLUSTER INFO -----' \
        >&"$stdout_fd"
}

# --- main --------------------------------------------------------------------

main() {
    parse_options "$@"
    [ "$(id -u)" -eq 0 ] || fail_usage 'must be run as root (sudo)'
    if [ -n "$upgrade_stage" ]; then
        echo "$SCRIPT_NAME: upgrade stage $upgrade_stage to ${K8S_PACKAGE_VERSION}"
        export_proxy_environment
        upgrade_node
        return 0
    fi
    find_role

    # The cluster info block goes to the original stdout only.
    exec {stdout_fd}>&1
    if [ -n "$log_file" ]; then
        (umask 077; : >> "$log_file") 2> /dev/null ||
            fail_usage "-o: cannot write to $log_file"
        exec > >(tee -a "$log_file") 2> >(tee -a "$log_file" >&2)
    fi
    if [ -n "$debug" ]; then
        set -x
    fi
    echo "$SCRIPT_NAME: $role $node_ip, control-plane endpoint $endpoint"

    export_proxy_environment
    if node_prepared; then
        echo "Node preparation skipped: kubelet and kubeadm" \
            "${K8S_PACKAGE_VERSION} are installed, containerd and kubectl exist."
    else
        echo "Preparing the node: kernel, containerd, Kubernetes ${K8S_PACKAGE_VERSION}."
        prepare_node
    fi
    write_kubelet_defaults

    if [ -n "$member" ]; then
        echo "This node already belongs to a cluster ($KUBE_DIR/kubelet.conf" \
            "exists): not initialised or joined again."
        finish_network_addon
    elif [ "$role" = 'first-master' ]; then
        create_cluster
    else
        join_cluster
    fi

    if [ "$role" != 'worker' ]; then
        [ -f "$KUBE_DIR/admin.conf" ] ||
            fail "$KUBE_DIR/admin.conf missing: this node is no control-plane node" 1
        copy_admin_kubeconfig
        print_cluster_info
    fi
    echo 'Install Success!'
}

# Run unless sourced (the unit tests source the script to test functions).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
