import pytest

from kubernetes_mgmt_pv.request import param_model
from kubernetes_mgmt_pv.storage import server_steps


def test_exportfs_output_one_line_and_wrapped():
    output = (
        '/volume       \t10.88.0.0/24(sync,wdelay,hide,no_subtree_check,'
        'sec=sys,rw,no_root_squash,no_all_squash)\n'
        '/volume/nfs/a-rather-long-directory-name\n'
        '\t\t10.10.0.0/24(rw,wdelay,insecure,root_squash,all_squash)\n'
        '\t\tfd00::/64(rw,wdelay)\n')
    assert server_steps.parse_exportfs(output) == {
        ('/volume', '10.88.0.0/24'),
        ('/volume/nfs/a-rather-long-directory-name', '10.10.0.0/24'),
        ('/volume/nfs/a-rather-long-directory-name', 'fd00::/64'),
    }


def test_exportfs_output_empty():
    assert server_steps.parse_exportfs('') == set()


def test_export_lines_group_clients_per_directory():
    exports = [param_model.NfsExport('/v/a', '10.0.0.0/24'),
               param_model.NfsExport('/v/b', '10.0.0.0/24'),
               param_model.NfsExport('/v/a', 'fd00::/64')]
    options = server_steps.EXPORT_OPTIONS
    assert server_steps.export_lines(exports) == [
        '/v/a 10.0.0.0/24(%s) fd00::/64(%s)' % (options, options),
        '/v/b 10.0.0.0/24(%s)' % options]


EXPORTFS_V = (
    '/volume1/nfs/pv1\n'
    '\t\tworker1(sync,wdelay,hide,no_subtree_check,sec=sys,rw,insecure,'
    'root_squash,all_squash)\n'
    '/volume1/nfs/pv2\n'
    '\t\t10.10.0.0/24(sync,wdelay,hide,no_subtree_check,sec=sys,rw)\n')


@pytest.mark.parametrize('export_to, missing', [
    ('worker1', False),
    ('WORKER1', False),    # exportfs prints the name as the resolver does
    ('Worker1', False),
    ('worker2', True),
    ('worker1.example', True),
])
def test_export_host_names_compare_case_insensitively(export_to, missing):
    exports = [param_model.NfsExport('/volume1/nfs/pv1', export_to),
               param_model.NfsExport('/volume1/nfs/pv2', '10.10.0.0/24')]
    expected = [('/volume1/nfs/pv1', export_to)] if missing else []
    assert server_steps.missing_exports(exports, EXPORTFS_V) == expected


def test_exports_of_another_directory_do_not_count():
    exports = [param_model.NfsExport('/volume1/nfs/PV2', '10.10.0.0/24')]
    assert server_steps.missing_exports(exports, EXPORTFS_V) == [
        ('/volume1/nfs/PV2', '10.10.0.0/24')]


@pytest.mark.parametrize('directory, volume', [
    ('/volume1', '/volume1'),
    ('/volume1/nfs/pv1', '/volume1'),
    ('/volume1/data/pv', '/volume1/data'),   # the deepest mount wins
    ('/volume10/pv', None),                  # a prefix is not a parent
    ('/home/ubuntu', None),
])
def test_export_directory_belongs_to_the_mount_that_contains_it(directory,
                                                                volume):
    mounts = {'/volume1': '7:0', '/volume1/data': '7:1', '/volume2': '7:2'}
    assert server_steps.volume_of(directory, mounts) == volume
