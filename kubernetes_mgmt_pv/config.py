"""oslo.config options of the driver, in the ``[kubernetes_mgmt_pv]`` group.

They are read from Tacker's own configuration file (tacker.conf); every
option has a default that works for a cluster built from the sample VNF
package, so none has to be set.
"""

from oslo_config import cfg

GROUP_NAME = 'kubernetes_mgmt_pv'

group = cfg.OptGroup(
    GROUP_NAME,
    title='Kubernetes management driver with persistent volumes',
    help='Options of the mgmt-drivers-kubernetes Tacker management driver.')

HOST_KEY_POLICIES = ('console', 'reject', 'known_hosts', 'warn')
CONSOLE_KEY_FALLBACKS = ('reject', 'known_hosts', 'warn')

ssh_opts = [
    cfg.StrOpt(
        'host_key_policy', default='console', choices=HOST_KEY_POLICIES,
        help='How the SSH host key of a VM is verified before the password '
             'is sent. "console": accept only a key that the VM printed on '
             'its console (cloud-init keys_to_console, on by default in '
             'Ubuntu and Debian cloud images), read through Nova\'s '
             'console-output API with the VIM credentials, waiting up to '
             'console_key_timeout while the VM boots; protects against an '
             'impostor at the VM\'s address on first contact and after a '
             'heal, which gives the VM a new key. "reject": accept only keys '
             'already listed in known_hosts_file (and the system and user '
             'known_hosts files); protects fully, but VMs that Heat creates '
             'have new keys, which must be added there before each operation. '
             '"known_hosts": trust on first use, recording new keys in '
             'known_hosts_file and refusing a host whose key changed; '
             'protects only after the first contact, and refuses a healed '
             'VM until its old entry is removed. "warn": accept any key and '
             'log a warning; no protection: an impostor at the VM\'s address '
             'receives the password.'),
    cfg.FloatOpt(
        'console_key_timeout', default=300.0, min=0.0,
        help='With host_key_policy "console": seconds to wait for a '
             'booting VM to print its SSH host keys on its console before '
             'console_key_fallback applies. The console is read again with '
             'a doubling delay (1 to 15 seconds) until then.'),
    cfg.StrOpt(
        'console_key_fallback', default='reject',
        choices=CONSOLE_KEY_FALLBACKS,
        help='With host_key_policy "console", what to do when the VM\'s '
             'console lists no SSH host keys within console_key_timeout, or '
             'cannot be read (console logs not readable by the VIM user or '
             'not supported by the hypervisor). "reject": refuse the VM, '
             'before the password is sent. "known_hosts": trust on first '
             'use with known_hosts_file, where keys verified on the console '
             'are recorded too, so a VM whose console has since lost its '
             'keys is still checked. "warn": accept any key and log a '
             'warning.'),
    cfg.StrOpt(
        'ssh_key_dir', default='/etc/tacker/kubernetes-mgmt-pv/keys',
        help='Directory of the SSH private keys that requests name by file '
             'name (ssh_key of master_node, worker_node and storage_server), '
             'so no password is in the request, which Tacker shows in its '
             'API. The directory (and with ssh_key_per_project each '
             'project\'s subdirectory) must be a directory, not a symbolic '
             'link, owned by tacker-conductor\'s user and not writable by '
             'group or others (e.g. mode 0700); each key file a regular file '
             '(not a symbolic link) owned by that user, mode 0600, holding '
             'an unencrypted Ed25519, ECDSA or RSA key.'),
    cfg.BoolOpt(
        'ssh_key_per_project', default=False,
        help='Look up the key file a request names in the subdirectory of '
             'ssh_key_dir named after the project id of the VNF instance '
             '(<ssh_key_dir>/<project id>/<ssh_key>), so that a project '
             'cannot log in with a key placed for another project. Tacker '
             'v1: the VNF instance\'s project; Tacker v2: the project that '
             'owns the instance\'s OpenStack VIM in Tacker\'s VIM registry '
             '(the instance needs a vimConnectionInfo with a vimId). When '
             'False, every project may name every key file of '
             'ssh_key_dir.'),
    cfg.StrOpt(
        'known_hosts_file',
        default='/var/lib/tacker/kubernetes_mgmt_pv_known_hosts',
        help='known_hosts file used by the "reject" and "known_hosts" host '
             'key policies and by console_key_fallback "known_hosts".'),
    cfg.FloatOpt(
        'ssh_keepalive_interval', default=10.0, min=0.0,
        help='Seconds of silence after which an SSH keepalive is sent and '
             'the host of a quiet command is asked for an answer; a host '
             'that leaves three keepalives unacknowledged, or gives no '
             'answer for command_timeout, is considered dead and its '
             'connection closed, so a VM that stops answering fails the '
             'running step instead of hanging the hook. 0 turns keepalives '
             'off (the command timeouts still apply).'),
    cfg.FloatOpt(
        'ssh_connect_timeout', default=30.0, min=1.0,
        help='Seconds to wait for one SSH connection attempt (TCP, banner '
             'and authentication).'),
    cfg.IntOpt(
        'ssh_connect_retries', default=10, min=0,
        help='How many times a failed SSH connection is retried. A VM that '
             'Heat has just created may still be booting.'),
    cfg.FloatOpt(
        'ssh_retry_backoff', default=2.0, min=0.0,
        help='Seconds before the first SSH connection retry; the delay '
             'doubles after each failure, up to ssh_retry_max_delay.'),
    cfg.FloatOpt(
        'ssh_retry_max_delay', default=30.0, min=0.0,
        help='Upper bound of the delay between two SSH connection retries.'),
    cfg.FloatOpt(
        'command_timeout', default=300.0, min=1.0,
        help='Seconds a short remote command (check, mount, exportfs, '
             'kubectl) may run before it is abandoned, and the longest a '
             'host may leave any command (the install script too) without '
             'an answer. Abandoned commands are never re-run '
             'automatically.'),
    cfg.IntOpt(
        'command_output_limit', default=16 * 1024 * 1024, min=65536,
        help='Bytes a remote command may print on each of its output '
             'streams (stdout, stderr). A command printing more is '
             'abandoned and its step fails, naming the host and the '
             'command, so a VM cannot fill tacker-conductor\'s memory.'),
    cfg.FloatOpt(
        'package_install_timeout', default=1800.0, min=1.0,
        help='Seconds an apt-get update or install may run.'),
]

step_opts = [
    cfg.IntOpt(
        'max_concurrent_nodes', default=16, min=1,
        help='How many Master/Worker nodes are configured at the same time '
             '(Worker joins, NFS client installation, host checks).'),
    cfg.IntOpt(
        'max_concurrent_hooks', default=8, min=1,
        help='How many hooks (of different VNF instances: Tacker runs them '
             'at the same time in one conductor) do remote work at once, '
             'in this tacker-conductor process. A hook beyond it waits '
             'before its first remote step until another hook returns.'),
    cfg.IntOpt(
        'max_ssh_sessions', default=256, min=1,
        help='How many SSH sessions are open at once in this '
             'tacker-conductor process, all hooks together. A hook keeps '
             'one session per host until it returns and first waits until '
             'as many sessions as its VNF has hosts (at most this cap) are '
             'free; a hook never closes another hook\'s session. A hook '
             'with more hosts than the cap (a warning says so) closes its '
             'own idle session used most recently to make room (that host '
             'is logged in to again when next used). Each open session '
             'costs the conductor a socket, a thread and some 100 KiB.'),
    cfg.IntOpt(
        'max_node_threads', default=32, min=1,
        help='How many threads the driver runs for per-node work at once '
             'in this tacker-conductor process, all hooks together '
             '(each step also uses its hook\'s own thread, so a step '
             'progresses when all are taken).'),
    cfg.ListOpt(
        'supported_os', default=['ubuntu:20.04', 'ubuntu:22.04',
                                 'ubuntu:24.04', 'ubuntu:26.04', 'debian:11',
                                 'debian:12', 'debian:13'],
        help='Operating systems (os-release ID:VERSION_ID) the driver '
             'configures (Kubernetes nodes and the Storage server). Other '
             'systems are refused before any change is made.'),
    cfg.FloatOpt(
        'pv_available_timeout', default=300.0, min=1.0,
        help='Seconds to wait for a registered PersistentVolume to become '
             'Available before it is rolled back.'),
    cfg.FloatOpt(
        'csi_driver_ready_timeout', default=600.0, min=1.0,
        help='Seconds to wait, after applying csi-driver-nfs for the '
             'storage classes, for its controller to be available and its '
             'node plugin to run on every node (on a new or healed node '
             'too).'),
    cfg.FloatOpt(
        'pv_delete_timeout', default=300.0, min=1.0,
        help='Seconds to wait for the PersistentVolumes to disappear when '
             'they are deleted before the storage server is healed.'),
]

cluster_opts = [
    cfg.FloatOpt(
        'cluster_install_timeout', default=2700.0, min=1.0,
        help='Seconds the install script may run on one node (package '
             'downloads, kubeadm init or join).'),
    cfg.FloatOpt(
        'node_ready_timeout', default=600.0, min=1.0,
        help='Seconds to wait for every Node to report Ready after the '
             'install (the network plugin starts on each node).'),
    cfg.FloatOpt(
        'drain_timeout', default=300.0, min=1.0,
        help='Seconds kubectl drain may take to evict the pods of a Worker '
             'or Master that a scale-in or heal removes. A drain that '
             'cannot finish in time (a PodDisruptionBudget allows no '
             'disruption, a pod without controller) fails the operation '
             'naming the blocking pods and budgets; the node stays in the '
             'cluster, cordoned.'),
    cfg.BoolOpt(
        'drain_force', default=False,
        help='Drain nodes with --force --disable-eviction: pods without a '
             'controller are deleted and PodDisruptionBudgets are ignored '
             '(pods are deleted instead of evicted). Only for clusters '
             'whose workloads tolerate losing pods without warning.'),
    cfg.StrOpt(
        'upgrade_max_unavailable', default='10%',
        regex=r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)$',
        help='How many Workers the Kubernetes upgrade drains and upgrades '
             'at once, unless the change_vnfpkg request\'s '
             'additionalParams.upgrade_max_unavailable says: a number '
             '("3") or a percentage of the Workers ("25%", rounded up, '
             'at least one Worker); no more than max_concurrent_nodes at a '
             'time. The Masters are upgraded one at a time.'),
    cfg.IntOpt(
        'cert_renewal_days', default=60, min=0,
        help='Every cluster hook reads "kubeadm certs check-expiration" on '
             'the Masters; a Master with a certificate that expires within '
             'this many days renews them ("kubeadm certs renew all"), one '
             'Master at a time, and restarts its control-plane static pods, '
             'waiting for its API server to answer again. 0 only reads '
             'them.'),
    cfg.IntOpt(
        'etcd_snapshot_keep', default=3, min=1,
        help='Before "kubeadm upgrade apply" and before a Master\'s etcd '
             'member is removed (heal, scale-in), the driver saves an etcd '
             'snapshot on the Master (/var/backups/etcd-snapshots, '
             'root-only) and, when the VNF has a Storage server, a copy on '
             'its volume (.etcd-snapshots at the top of the first volume '
             'not exported whole). Each place keeps this many of the '
             'newest snapshots; older ones are removed.'),
    cfg.FloatOpt(
        'vim_token_timeout', default=120.0, min=1.0,
        help='Seconds to wait for Kubernetes to fill in the token of the '
             'ServiceAccount Secret that the VIM authenticates with.'),
]

v2_opts = [
    cfg.FloatOpt(
        'v2_hook_deadline', default=10800.0, min=1.0,
        help='Tacker v2 door: seconds one hook (one run of the VNF '
             'package\'s script) may take in all. Tacker v2 runs the script '
             'without a time limit while it holds the VNF instance\'s lock; '
             'past this deadline the script stops, failing the operation '
             '("<hook> failed: b\'no result within v2_hook_deadline ..."), '
             'which can then be retried.'),
    cfg.StrOpt(
        'v2_log_file',
        help='Tacker v2 door: the file each hook appends its full log to '
             '(secrets redacted). Default: kubernetes-mgmt-pv-v2.log in '
             'Tacker\'s log_dir, else in its state_path (directories the '
             'conductor\'s user writes). The file is created with mode '
             '0600, its missing directories with 0700; a symbolic link, a '
             'file that is not regular or belongs to another user is '
             'refused, failing the hook before it changes anything. Tacker '
             'v2 drops the script\'s output when the hook succeeds and shows '
             'only its one-line error when it fails.'),
]

auto_heal_opts = [
    cfg.StrOpt(
        'auto_heal_targets_dir',
        help='Tacker v2 auto-heal: the directory (on tacker-conductor\'s '
             'host) where the driver keeps one Prometheus file_sd file per '
             'VNF instance, <instance id>.json, listing the probe target of '
             'each of its VMs (a Master\'s or Worker\'s kubelet port 10250, '
             'the Storage server\'s SSH port) with the labels Tacker\'s '
             'Prometheus plugin acts on. Written at instantiate_end, '
             'scale_end and heal_end, set aside as <instance id>.json.paused '
             'while the instance\'s isAutohealEnabled is not true, removed '
             'at terminate_end. Unset: no monitoring is written. The '
             'directory must exist, be writable by the conductor\'s user '
             'and be read by a Prometheus job (file_sd_configs, '
             'blackbox-exporter tcp_connect); see the operator guide\'s '
             '"Auto-heal" section.'),
    cfg.StrOpt(
        'auto_heal_max_unhealthy', default='40%',
        regex=r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)$',
        help='An automatic heal (Tacker v2\'s Prometheus plugin: a heal '
             'request with isAutomaticInvocation) is refused before any '
             'change while more nodes than this are not Ready at once: a '
             'number ("2") or a percentage of the Workers ("40%", rounded '
             'down, at least one node). So many nodes down at once is a '
             'network or cloud outage, which replacing VMs makes worse. An '
             'operator\'s heal is never refused for it.'),
    cfg.FloatOpt(
        'auto_heal_startup_grace', default=600.0, min=0.0,
        help='Seconds after a Node registered during which an automatic '
             'heal of it is refused: it may still be joining (as Cluster '
             'API\'s nodeStartupTimeout).'),
]

ALL_OPTS = ssh_opts + step_opts + cluster_opts + v2_opts + auto_heal_opts


def register_opts(conf):
    """Register the driver's options on ``conf`` (idempotent)."""
    conf.register_group(group)
    conf.register_opts(ALL_OPTS, group=group)


def list_opts():
    """Options for oslo-config-generator (entry point ``oslo.config.opts``)."""
    return [(group, ALL_OPTS)]


def options(conf=None):
    """The driver's option group of ``conf`` (default: the global CONF)."""
    return (conf or cfg.CONF)[GROUP_NAME]


register_opts(cfg.CONF)
CONF = cfg.CONF
