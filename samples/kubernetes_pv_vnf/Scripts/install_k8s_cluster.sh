#!/usr/bin/env bash
# Install a Kubernetes node with kubeadm, then create or join the cluster.
#
# Shipped with the sample VNF package for the cluster-installation half of
# the management driver, which copies it to each Master and Worker VM
# (Ubuntu 20.04, 22.04 or 24.04) and runs it as root. The persistent-volume
# half of the driver does not use it.
#
# Usage:
#   First Master:  install_k8s_cluster.sh -m IPS -i ENDPOINT [-p CIDR] [-a CIDR]
#   Other Masters: install_k8s_cluster.sh -m IPS -i ENDPOINT -t TOKEN -s HASH -k KEY
#   Worker:        install_k8s_cluster.sh -w IP -i ENDPOINT -t TOKEN -s HASH
#
# Options:
#   -m IPS       Comma-separated addresses of all Masters. The Master holding
#                the first one runs `kubeadm init`; the others join it as
#                control-plane nodes.
#   -w IP        Address of this Worker; it joins the cluster.
#                Nodes register with their -m or -w address (kubelet --node-ip).
#   -i ENDPOINT  Control-plane endpoint (API server on port 6443): the first
#                Master's address, or a virtual IP. When it is not the first
#                Master's address, keepalived moves it between the Masters
#                (VRRP over unicast), towards one whose API server answers.
#   -p CIDR      Pod network (default 192.168.0.0/16); Calico uses it.
#   -a CIDR      Service network (default 10.96.0.0/12).
#   -t TOKEN     Bootstrap token, to join.
#   -s HASH      Discovery CA certificate hash (sha256:...), to join.
#   -k KEY       Certificate key, to join as a control-plane node.
#   -o FILE      Also append all output to FILE.
#   -d           Trace every command (set -x).
#   -h           Show this help.
#
# Environment: http_proxy, https_proxy and no_proxy, if set, are used by
# apt-get, curl and containerd (image pulls).
#
# The first Master prints what the other nodes need to join, one per line:
#   server:https://ENDPOINT:6443
#   token:TOKEN
#   ssl_ca_cert_hash:sha256:HASH
#   certificate_key:KEY
#
# Re-running is safe: a node that already belongs to a cluster is not
# initialised or joined again. Exit status: 0 on success, 2 on a usage
# error, the failing command's status otherwise.

set -euo pipefail

# Pinned versions: change them together (pkgs.k8s.io has one repository per
# minor version; package versions are <version>-<revision>).
readonly K8S_MINOR='v1.31'
readonly K8S_PACKAGE_VERSION='1.31.4-1.1'
readonly CALICO_VERSION='v3.28.2'
readonly API_PORT=6443
readonly KEYRING='/etc/apt/keyrings/kubernetes-apt-keyring.gpg'

usage() {
    sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
}

fail_usage() {
    echo "install_k8s_cluster.sh: $1" >&2
    echo "Run with -h for help." >&2
    exit 2
}

masters='' worker='' endpoint='' pod_cidr='192.168.0.0/16'
service_cidr='10.96.0.0/12' token='' ca_hash='' cert_key='' log_file=''
while getopts 'm:w:i:p:a:t:s:k:o:dh' option; do
    case "$option" in
        m) masters="$OPTARG" ;;
        w) worker="$OPTARG" ;;
        i) endpoint="$OPTARG" ;;
        p) pod_cidr="$OPTARG" ;;
        a) service_cidr="$OPTARG" ;;
        t) token="$OPTARG" ;;
        s) ca_hash="$OPTARG" ;;
        k) cert_key="$OPTARG" ;;
        o) log_file="$OPTARG" ;;
        d) set -x ;;
        h) usage; exit 0 ;;
        *) fail_usage 'unknown option' ;;
    esac
done

[ "$(id -u)" -eq 0 ] || fail_usage 'must run as root'
[ -n "$endpoint" ] || fail_usage '-i ENDPOINT is required'
if [ -n "$masters" ] && [ -n "$worker" ]; then
    fail_usage '-m and -w are mutually exclusive'
fi
if [ -n "$log_file" ]; then
    exec > >(tee -a "$log_file") 2>&1
fi

# The address of this host among the given ones, or nothing.
local_address_among() {
    local candidate addresses
    addresses="$(ip -o addr show)"
    for candidate in "$@"; do
        if [[ "$addresses" == *" $candidate/"* ]]; then
            echo "$candidate"
            return
        fi
    done
}

IFS=',' read -r -a master_list <<< "$masters"
if [ -n "$masters" ]; then
    node_ip="$(local_address_among "${master_list[@]}")"
    [ -n "$node_ip" ] || fail_usage "none of $masters is an address of this host"
    if [ "$node_ip" = "${master_list[0]}" ]; then
        role='first-master'
    else
        role='master'
        if [ -z "$token" ] || [ -z "$ca_hash" ] || [ -z "$cert_key" ]; then
            fail_usage 'a joining Master needs -t, -s and -k'
        fi
    fi
elif [ -n "$worker" ]; then
    node_ip="$(local_address_among "$worker")"
    [ -n "$node_ip" ] || fail_usage "$worker is not an address of this host"
    role='worker'
    if [ -z "$token" ] || [ -z "$ca_hash" ]; then
        fail_usage 'a Worker needs -t and -s'
    fi
else
    fail_usage 'either -m or -w is required'
fi

export DEBIAN_FRONTEND=noninteractive

prepare_kernel() {
    swapoff -a
    sed -i -E 's|^([^#].*[[:space:]]swap[[:space:]].*)$|# \1|' /etc/fstab
    printf 'overlay\nbr_netfilter\n' > /etc/modules-load.d/kubernetes.conf
    modprobe overlay
    modprobe br_netfilter
    cat > /etc/sysctl.d/90-kubernetes.conf <<'EOF'
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
EOF
    sysctl --system > /dev/null
}

install_containerd() {
    apt-get update -q
    apt-get install -y -q ca-certificates curl gpg containerd
    mkdir -p /etc/containerd
    containerd config default |
        sed 's/SystemdCgroup = false/SystemdCgroup = true/' \
        > /etc/containerd/config.toml
    if [ -n "${http_proxy:-}${https_proxy:-}" ]; then
        mkdir -p /etc/systemd/system/containerd.service.d
        cat > /etc/systemd/system/containerd.service.d/proxy.conf <<EOF
[Service]
Environment="HTTP_PROXY=${http_proxy:-}" "HTTPS_PROXY=${https_proxy:-}" "NO_PROXY=${no_proxy:-}"
EOF
        systemctl daemon-reload
    fi
    systemctl restart containerd
    systemctl enable containerd
}

install_kubernetes_packages() {
    local repo="https://pkgs.k8s.io/core:/stable:/${K8S_MINOR}/deb/"
    install -d -m 755 /etc/apt/keyrings
    curl -fsSL "${repo}Release.key" | gpg --batch --yes --dearmor -o "$KEYRING"
    echo "deb [signed-by=${KEYRING}] ${repo} /" \
        > /etc/apt/sources.list.d/kubernetes.list
    apt-get update -q
    apt-get install -y -q --allow-change-held-packages \
        "kubelet=${K8S_PACKAGE_VERSION}" "kubeadm=${K8S_PACKAGE_VERSION}" \
        "kubectl=${K8S_PACKAGE_VERSION}"
    apt-mark hold kubelet kubeadm kubectl
    # The node registers with the address the cluster knows it by, even
    # on a VM with several ports.
    echo "KUBELET_EXTRA_ARGS=--node-ip=${node_ip}" > /etc/default/kubelet
    systemctl enable kubelet
}

# keepalived holds the virtual endpoint on one Master, preferring the first
# and moving away from a Master whose API server stops answering.
setup_virtual_endpoint() {
    local interface='' prefix='' peer priority=100
    read -r interface prefix < <(ip -o -4 addr show |
        awk -v ip="$node_ip" '{split($4, a, "/")} a[1] == ip {print $2, a[2]}') || true
    [ -n "$interface" ] || fail_usage "no IPv4 interface holds $node_ip"
    [ "$role" = 'first-master' ] && priority=150
    apt-get install -y -q keepalived
    {
        echo 'global_defs {'
        echo '    enable_script_security'
        echo '    script_user root'
        echo '}'
        echo 'vrrp_script api_server {'
        echo "    script \"/usr/bin/curl -sfk --max-time 2 -o /dev/null https://127.0.0.1:${API_PORT}/healthz\""
        echo '    interval 3'
        echo '    fall 2'
        echo '    rise 2'
        echo '    weight -60'
        echo '}'
        echo 'vrrp_instance kubernetes_api {'
        echo '    state BACKUP'
        echo "    interface ${interface}"
        echo "    virtual_router_id $(( ${endpoint##*.} % 255 + 1 ))"
        echo "    priority ${priority}"
        echo '    advert_int 1'
        echo "    unicast_src_ip ${node_ip}"
        echo '    unicast_peer {'
        for peer in "${master_list[@]}"; do
            [ "$peer" = "$node_ip" ] || echo "        ${peer}"
        done
        echo '    }'
        echo "    virtual_ipaddress { ${endpoint}/${prefix} dev ${interface} }"
        echo '    track_script { api_server }'
        echo '}'
    } > /etc/keepalived/keepalived.conf
    systemctl enable keepalived
    systemctl restart keepalived
}

admin_kubeconfig_for_login_user() {
    local user="${SUDO_USER:-}" home
    if [ -z "$user" ] || [ "$user" = 'root' ]; then
        return 0
    fi
    home="$(getent passwd "$user" | cut -d: -f6)"
    install -d -o "$user" -g "$user" -m 700 "$home/.kube"
    install -o "$user" -g "$user" -m 600 /etc/kubernetes/admin.conf \
        "$home/.kube/config"
}

print_join_information() {
    local hash
    hash="$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt |
        openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"
    echo "server:https://${endpoint}:${API_PORT}"
    echo "token:$(kubeadm token create --ttl 24h)"
    echo "ssl_ca_cert_hash:sha256:${hash}"
    echo "certificate_key:$(kubeadm init phase upload-certs --upload-certs |
        tail -n 1)"
}

create_cluster() {
    kubeadm init --control-plane-endpoint "${endpoint}:${API_PORT}" \
        --apiserver-advertise-address "$node_ip" \
        --pod-network-cidr "$pod_cidr" --service-cidr "$service_cidr" \
        --upload-certs
    kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f \
        "https://raw.githubusercontent.com/projectcalico/calico/${CALICO_VERSION}/manifests/calico.yaml"
}

join_cluster() {
    local extra=()
    if [ "$role" = 'master' ]; then
        extra=(--control-plane --certificate-key "$cert_key"
               --apiserver-advertise-address "$node_ip")
    fi
    kubeadm join "${endpoint}:${API_PORT}" --token "$token" \
        --discovery-token-ca-cert-hash "$ca_hash" "${extra[@]}"
}

prepare_kernel
install_containerd
install_kubernetes_packages
if [ "$role" != 'worker' ] && [ "$endpoint" != "${master_list[0]}" ]; then
    setup_virtual_endpoint
fi
if [ -f /etc/kubernetes/kubelet.conf ]; then
    echo "This node already belongs to a cluster: not initialised or joined."
elif [ "$role" = 'first-master' ]; then
    create_cluster
else
    join_cluster
fi
if [ "$role" != 'worker' ]; then
    admin_kubeconfig_for_login_user
fi
if [ "$role" = 'first-master' ]; then
    print_join_information
fi
echo 'Install Success!'
