from kubernetes_mgmt_pv import params
from kubernetes_mgmt_pv import storage


def test_exportfs_output_one_line_and_wrapped():
    output = (
        '/volume       \t10.88.0.0/24(sync,wdelay,hide,no_subtree_check,'
        'sec=sys,rw,no_root_squash,no_all_squash)\n'
        '/volume/nfs/a-rather-long-directory-name\n'
        '\t\t10.10.0.0/24(rw,wdelay,insecure,root_squash,all_squash)\n'
        '\t\tfd00::/64(rw,wdelay)\n')
    assert storage.parse_exportfs(output) == {
        ('/volume', '10.88.0.0/24'),
        ('/volume/nfs/a-rather-long-directory-name', '10.10.0.0/24'),
        ('/volume/nfs/a-rather-long-directory-name', 'fd00::/64'),
    }


def test_exportfs_output_empty():
    assert storage.parse_exportfs('') == set()


def test_export_lines_group_clients_per_directory():
    exports = [params.NfsExport('/v/a', '10.0.0.0/24'),
               params.NfsExport('/v/b', '10.0.0.0/24'),
               params.NfsExport('/v/a', 'fd00::/64')]
    options = storage.EXPORT_OPTIONS
    assert storage.export_lines(exports) == [
        '/v/a 10.0.0.0/24(%s) fd00::/64(%s)' % (options, options),
        '/v/b 10.0.0.0/24(%s)' % options]
