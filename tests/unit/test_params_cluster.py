"""The cluster keys of k8s_cluster_installation_param (script_path,
vim_name, the CIDRs and names given with master_node, proxy.k8s_node_cidr),
the warnings the model records, and the user guide's own request."""

import json
import re

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.request import param_model
from tests.unit import test_params

ROOT = param_model.ROOT
MASTER = param_model.MASTER_PATH
PROXY = param_model.PROXY_PATH

# persistent_volumes_kubernetes_param_file.json of user-guide-k8s-pv.rst,
# exactly as the guide prints it (placeholder proxy ports included).
USER_GUIDE_REQUEST = """
    {
      "flavourId": "simple",
      "additionalParams": {
        "k8s_cluster_installation_param": {
          "script_path": "Scripts/install_k8s_cluster.sh",
          "vim_name": "kubernetes_vim",
          "master_node": {
            "aspect_id": "master_instance",
            "ssh_cp_name": "masterNode_CP1",
            "nic_cp_name": "masterNode_CP1",
            "username": "ubuntu",
            "password": "ubuntu",
            "pod_cidr": "192.168.3.0/16",
            "cluster_cidr": "10.199.187.0/24",
            "cluster_cp_name": "masterNode_CP1"
          },
          "worker_node": {
            "aspect_id": "worker_instance",
            "ssh_cp_name": "workerNode_CP2",
            "nic_cp_name": "workerNode_CP2",
            "username": "ubuntu",
            "password": "ubuntu"
          },
          "proxy": {
            "http_proxy": "http://user1:password1@host1:port1",
            "https_proxy": "https://user2:password2@host2:port2",
            "no_proxy": "192.168.246.0/24,10.0.0.1",
            "k8s_node_cidr": "10.10.0.0/24"
          },
          "storage_server": {
            "ssh_cp_name": "storage_server_CP",
            "nic_cp_name": "storage_server_CP",
            "username": "ubuntu",
            "password": "ubuntu",
            "cinder_volume_setup_params": [
              {
                "volume_resource_id": "storage_server_volume",
                "mount_to": "/volume"
              }
            ],
            "nfs_server_setup_params": [
              {
                "export_dir": "/volume/nfs/pv1",
                "export_to": "10.10.0.0/24"
              },
              {
                "export_dir": "/volume/nfs/pv2",
                "export_to": "10.10.0.0/24"
              }
            ]
          },
          "pv_registration_params": [
            {
              "pv_manifest_file_path": "Files/kubernetes/nfs-pv1.yaml",
              "nfs_server_cp": "storage_server_CP"
            },
            {
              "pv_manifest_file_path": "Files/kubernetes/nfs-pv2.yaml",
              "nfs_server_cp": "storage_server_CP"
            }
          ]
        },
        "lcm-operation-user-data": "./UserData/k8s_cluster_user_data.py",
        "lcm-operation-user-data-class": "KubernetesClusterUserData"
      },
      "extVirtualLinks": [
        {
          "id": "net0_master",
          "resourceId": "f0c82461-36b5-4d86-8322-b0bc19cda65f",
          "extCps": [
            {
              "cpdId": "masterNode_CP1",
              "cpConfig": [
                {
                  "cpProtocolData": [
                    {
                      "layerProtocol": "IP_OVER_ETHERNET"
                    }
                  ]
                }
              ]
            }
          ]
        },
        {
          "id": "net0_worker",
          "resourceId": "f0c82461-36b5-4d86-8322-b0bc19cda65f",
          "extCps": [
            {
              "cpdId": "workerNode_CP2",
              "cpConfig": [
                {
                  "cpProtocolData": [
                    {
                      "layerProtocol": "IP_OVER_ETHERNET"
                    }
                  ]
                }
              ]
            }
          ]
        },
        {
          "id": "net0_storage",
          "resourceId": "f0c82461-36b5-4d86-8322-b0bc19cda65f",
          "extCps": [
            {
              "cpdId": "storage_server_CP",
              "cpConfig": [
                {
                  "cpProtocolData": [
                    {
                      "layerProtocol": "IP_OVER_ETHERNET"
                    }
                  ]
                }
              ]
            }
          ]
        }
      ],
      "vimConnectionInfo": [
        {
          "id": "8a3adb69-0784-43c7-833e-aab0b6ab4470",
          "vimId": "8d8373fe-6977-49ff-83ac-7756572ed186",
          "vimType": "openstack"
        }
      ]
    }
"""


def errors_of(value):
    with pytest.raises(exceptions.ParameterErrors) as caught:
        param_model.parse(value)
    return {error.path: error.reason for error in caught.value.errors}


def warnings_of(value):
    return {w.path: w.reason for w in param_model.parse(value).warnings}


def with_changes(**changes):
    """The sample with keys of master_node, proxy or the root replaced
    (None deletes), named like master_node__pod_cidr."""
    value = test_params.sample()
    for name, new in changes.items():
        parent, _, key = name.rpartition('__')
        mapping = value[ROOT][parent] if parent else value[ROOT]
        if new is None:
            mapping.pop(key, None)
        else:
            mapping[key] = new
    return value


def test_the_user_guide_request_fails_only_on_its_placeholder_ports():
    request = json.loads(USER_GUIDE_REQUEST)
    assert set(errors_of(request['additionalParams'])) == {
        PROXY + '.http_proxy', PROXY + '.https_proxy'}
    proxy = request['additionalParams'][ROOT]['proxy']
    proxy['http_proxy'] = 'http://user1:password1@host1:3128'
    proxy['https_proxy'] = 'https://user2:password2@host2:3129'
    parsed = param_model.parse(request['additionalParams'])
    assert parsed.script_path == 'Scripts/install_k8s_cluster.sh'
    assert parsed.vim_name == 'kubernetes_vim'
    assert parsed.network == param_model.ClusterNetwork(
        pod_cidr='192.168.3.0/16', cluster_cidr='10.199.187.0/24',
        cluster_cp_name='masterNode_CP1')
    assert parsed.proxy.k8s_node_cidr == '10.10.0.0/24'
    assert parsed.proxy.http_proxy == 'http://user1:password1@host1:3128'
    assert parsed.master.ssh_cp_name == 'masterNode_CP1'
    assert parsed.pv_enabled and len(parsed.pv_registrations) == 2
    assert set(w.path for w in parsed.warnings) == {MASTER + '.pod_cidr'}


def test_the_findings_never_echo_proxy_credentials():
    parsed = param_model.parse_partially(json.loads(
        USER_GUIDE_REQUEST)['additionalParams'])
    assert 'password1' not in repr(parsed.errors)
    assert 'password1' not in repr(parsed.params.warnings)


def test_host_bits_are_accepted_with_a_warning():
    parsed = param_model.parse(test_params.sample())
    assert parsed.network.pod_cidr == '192.168.3.0/16'
    assert warnings_of(test_params.sample()) == {
        MASTER + '.pod_cidr':
            "'192.168.3.0/16' has host bits set; kubeadm uses 192.168.0.0/16"}


@pytest.mark.parametrize('key, value', [
    ('master_node__pod_cidr', '10.244.0.0/16'),
    ('master_node__pod_cidr', '10.244.0.0/24'),
    ('master_node__pod_cidr', '172.0.0.0/8'),
    ('master_node__pod_cidr', 'fd00:10:244::/56'),
    ('master_node__pod_cidr', '10.244.0.0/16,fd00:10:244::/56'),
    ('master_node__cluster_cidr', '10.96.0.0/12'),
    ('master_node__cluster_cidr', '10.96.0.0/24'),
    ('master_node__cluster_cidr', 'fd00:10:96::/112'),
    ('master_node__cluster_cidr', '10.96.0.0/16,fd00:10:96::/108'),
    ('proxy__k8s_node_cidr', '10.10.0.0/16'),
    ('proxy__k8s_node_cidr', '10.10.0.5/32'),
    ('master_node__cluster_cp_name', 'vip_CP'),
    ('master_node__cluster_fip_name', 'vip_fip'),
    ('vim_name', 'kubernetes_vim_0f7c1e2a-9c5b-4a5e-8f7d-0123456789ab'),
    ('vim_name', 'k8s.cluster-1'),
    ('script_path', 'Scripts/sub/install.sh'),
])
def test_valid_cluster_values(key, value):
    value_of = with_changes(**{key: value})
    parsed = param_model.parse(value_of)
    model = {
        'master_node__pod_cidr': parsed.network.pod_cidr,
        'master_node__cluster_cidr': parsed.network.cluster_cidr,
        'master_node__cluster_cp_name': parsed.network.cluster_cp_name,
        'master_node__cluster_fip_name': parsed.network.cluster_fip_name,
        'proxy__k8s_node_cidr': parsed.proxy.k8s_node_cidr,
        'vim_name': parsed.vim_name,
        'script_path': parsed.script_path}
    assert model[key] == value


def test_the_cluster_keys_are_optional():
    parsed = param_model.parse(with_changes(
        script_path=None, vim_name=None, master_node__pod_cidr=None,
        master_node__cluster_cidr=None, master_node__cluster_cp_name=None,
        proxy__k8s_node_cidr=None))
    assert (parsed.script_path, parsed.vim_name) == (None, None)
    assert parsed.network == param_model.ClusterNetwork()
    assert parsed.proxy.k8s_node_cidr is None


@pytest.mark.parametrize('key, value, reason', [
    ('master_node__pod_cidr', '192.168.3.0', 'CIDR notation'),
    ('master_node__pod_cidr', '192.168.0.0/33', 'CIDR notation'),
    ('master_node__pod_cidr', '192.168.0.0/255.255.0.0', 'CIDR notation'),
    ('master_node__pod_cidr', '192.168.0.0/16 ', 'CIDR notation'),
    ('master_node__pod_cidr', '192.168.0.0/16;reboot', 'CIDR notation'),
    ('master_node__pod_cidr', 'fe80::%eth0/64', 'CIDR notation'),
    ('master_node__pod_cidr', 'pods', 'CIDR notation'),
    ('master_node__pod_cidr', '10.0.0.0/8,10.1.0.0/16', 'dual-stack'),
    ('master_node__pod_cidr', '10.0.0.0/8,fd00::/56,fd01::/56', 'dual-stack'),
    ('master_node__pod_cidr', '10.244.0.0/25', 'from /8 to /24'),
    ('master_node__pod_cidr', '172.0.0.0/7', 'from /8 to /24'),
    ('master_node__cluster_cidr', '172.0.0.0/11', 'at most 20 host bits'),
    ('master_node__cluster_cidr', 'fd00::/107', 'at most 20 host bits'),
    ('master_node__cluster_cidr', '10.96.0.0', 'CIDR notation'),
    ('proxy__k8s_node_cidr', '10.10.0.0/24,10.20.0.0/24', 'dual-stack'),
    ('proxy__k8s_node_cidr', 'nodes', 'CIDR notation'),
    ('master_node__pod_cidr', 16, 'must be a string'),
    ('master_node__cluster_cp_name', 'vip/CP', 'Heat resource name'),
    ('master_node__cluster_fip_name', '../fip', 'Heat resource name'),
    ('vim_name', 'my vim', 'letter or digit'),
    ('vim_name', 'x' * 256, 'letter or digit'),
    ('vim_name', '', 'non-empty'),
    ('script_path', '/tmp/install.sh', 'relative path'),
    ('script_path', '../install.sh', 'no ".."'),
    ('script_path', 'Scripts/../../install.sh', 'no ".."'),
    ('script_path', 'Scripts\\install.sh', 'relative path'),
])
def test_invalid_cluster_values_are_named_by_their_json_path(key, value,
                                                             reason):
    path = '.'.join([ROOT] + key.replace('__', '.').split('.'))
    found = errors_of(with_changes(**{key: value}))
    assert set(found) == {path}
    assert reason in found[path]


@pytest.mark.parametrize('changes, path, reason', [
    ({'master_node__cluster_cidr': '192.168.128.0/24'},
     MASTER + '.cluster_cidr', '192.168.128.0/24 overlaps pod_cidr '
     '192.168.0.0/16'),
    ({'master_node__pod_cidr': '10.10.0.0/16'},
     MASTER + '.pod_cidr', '10.10.0.0/16 overlaps proxy.k8s_node_cidr '
     '10.10.0.0/24'),
    ({'proxy__k8s_node_cidr': '10.199.187.0/26'},
     MASTER + '.cluster_cidr', '10.199.187.0/24 overlaps proxy.k8s_node_cidr '
     '10.199.187.0/26'),
    ({'master_node__pod_cidr': '10.1.0.0/16,fd00::/56',
      'master_node__cluster_cidr': 'fd00::/112'},
     MASTER + '.cluster_cidr', 'fd00::/112 overlaps pod_cidr fd00::/56'),
])
def test_overlapping_cidrs_are_refused(changes, path, reason):
    assert errors_of(with_changes(**changes)) == {path: reason}


def test_networks_of_different_families_do_not_overlap():
    param_model.parse(with_changes(
        master_node__pod_cidr='fd00::/56',
        master_node__cluster_cidr='10.0.0.0/16',
        proxy__k8s_node_cidr='10.1.0.0/24,fd01::/64'))


def test_master_node_is_parsed_without_storage_server():
    value = with_changes(storage_server=None, pv_registration_params=None,
                         master_node__password='\x00')
    assert errors_of(value) == {MASTER + '.password': (
        'must not contain control characters or lone surrogates, found '
        'U+0000 at offset 0')}


def test_a_cluster_without_storage_server_keeps_its_nodes():
    parsed = param_model.parse(with_changes(storage_server=None,
                                            pv_registration_params=None))
    assert not parsed.pv_enabled
    assert parsed.master.aspect_id == 'master_instance'
    assert parsed.worker.aspect_id == 'worker_instance'
    assert parsed.network.cluster_cidr == '10.199.187.0/24'


def test_master_node_is_optional_without_either_feature():
    parsed = param_model.parse(with_changes(
        storage_server=None, pv_registration_params=None, master_node=None,
        script_path=None))
    assert parsed.master is None
    assert parsed.network == param_model.ClusterNetwork()


def test_the_cluster_feature_needs_master_node():
    with pytest.raises(exceptions.ParameterErrors,
                       match=r'master_node: is required'):
        param_model.parse(with_changes(storage_server=None,
                                       pv_registration_params=None,
                                       master_node=None))


@pytest.mark.parametrize('key', ['master_node__helm_path',
                                 'worker_node__pod_cidr',
                                 'proxy__ftp_proxy',
                                 'helm_installation_script_path'])
def test_keys_of_shared_mappings_that_are_not_used_are_warnings(key):
    path = '.'.join([ROOT] + key.replace('__', '.').split('.'))
    found = warnings_of(with_changes(**{key: 'x'}))
    assert 'is not used by this driver and is ignored' in found[path]


@pytest.mark.parametrize('url', ['http://user:s3cret@proxy:port',
                                 'http://proxy:65536', 'https://proxy:80a'])
def test_a_proxy_port_that_is_no_port_number_is_an_error(url):
    found = errors_of(with_changes(proxy__http_proxy=url))
    assert list(found) == [PROXY + '.http_proxy']
    assert 's3cret' not in found[PROXY + '.http_proxy']


@pytest.mark.parametrize('url, ports', [
    ('http://proxy', {'1080', '80'}),
    ('http://user:s3cret@proxy/', {'1080', '80'}),
    ('https://[fd00::1]', {'443'}),
    ('http://proxy:3128', None)])
def test_a_proxy_without_a_port_names_the_ports_tools_assume(url, ports):
    found = warnings_of(with_changes(proxy__http_proxy=url))
    where = PROXY + '.http_proxy'
    if ports is None:
        assert where not in found
        return
    assert set(re.findall(r'port (\d+)', found[where])) == ports
    assert 's3cret' not in found[where]


def test_partial_parse_keeps_what_is_valid_and_names_the_rest():
    value = with_changes(vim_name='my vim', master_node__aspect_id='a b')
    result = param_model.parse_partially(value)
    assert {e.path for e in result.errors} == {
        ROOT + '.vim_name', MASTER + '.aspect_id'}
    assert result.params.vim_name is None
    assert result.params.master.aspect_id is None
    assert result.params.master.ssh_cp_name == 'masterNode_CP1'
    assert [v.json_path for v in result.params.storage.volumes] == [
        ROOT + '.storage_server.cinder_volume_setup_params[0]']
    assert [e.json_path for e in result.params.storage.exports] == [
        ROOT + '.storage_server.nfs_server_setup_params[%d]' % n
        for n in range(2)]


def test_partial_parse_never_raises():
    for value in (None, [], {ROOT: 'x'}, {ROOT: {'master_node': []}}):
        result = param_model.parse_partially(value)
        assert result.errors and isinstance(result.params,
                                            param_model.ClusterParams)
