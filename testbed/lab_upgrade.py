"""A TackerLab's cluster installed from the test apt repository, so that
a ChangeCurrentVnfPackage to the next minor's package upgrades it: what
tests/tacker_rest/test_upgrade_v2.py and tools/demo_tacker.py share.

``LabRepository`` starts a testbed.apt_repo.AptRepository and gives every
host of the lab a route to it, those Heat boots later too (a boot hook,
for the VMs of an instantiate, a scale-out or a heal). The hosts come
prepared as an offline image is (the stand-ins at the install script's
version installed), so the first packages fetched from the repository are
the next minor's, by the upgrade's ``install_k8s_cluster.sh -U kubeadm``.
Its packages carry the repository's key and the CNI manifest the
request's ``offline`` object names, as testbed.apt_repo.use_in does for a
functional test's cluster. A cluster installed at an older version
(``image_version``) boots from an offline image of that version: its
kubeadm and kubelet stand-ins, from the repository, replace the install
script's on each host booted meanwhile, so that the instantiate at that
version prepares nothing either.
"""

import os

from testbed import apt_repo
from testbed import standins
from testbed import virtual_vnf

ROOT = 'k8s_cluster_installation_param'
SCRIPT = 'Scripts/install_k8s_cluster.sh'
# What the install script finds installed to skip the node preparation
# (with kubectl and containerd of any version).
IMAGE_PACKAGES = ('kubeadm', 'kubelet')


class LabRepository(object):
    """The test apt repository for the hosts of ``lab`` (a started
    testbed.tacker_lab.TackerLab); use as a context manager."""

    def __init__(self, lab, versions=(), image_version=None):
        """``versions``: served besides the install script's and the next
        minor's (testbed.apt_repo), ``image_version`` among them."""
        self.lab = lab
        self.repository = apt_repo.AptRepository(versions=versions)
        self.image_version = image_version

    def __enter__(self):
        self.repository.start()
        try:
            for host in list(self.lab.engine.testbed.hosts.values()):
                self._route(host)
        except BaseException:
            self.repository.stop()
            raise
        self.lab.engine.boot_hooks.append(self._boot)
        return self

    def __exit__(self, *exc_info):
        if self._boot in self.lab.engine.boot_hooks:
            self.lab.engine.boot_hooks.remove(self._boot)
        self.repository.stop()

    def _boot(self, host):
        self._route(host)
        if self.image_version is None:
            return
        url = self.repository.url_for(self.image_version)
        debs = ['/tmp/%s_%s_all.deb' % (name, self.image_version)
                for name in IMAGE_PACKAGES]
        host.run(' && '.join(
            'curl -fsS -o %s %s%s' % (deb, url, deb[len('/tmp/'):])
            for deb in debs) + ' && dpkg -i %s && rm -f %s' % (
                ' '.join(debs), ' '.join(debs)))

    def _route(self, host):
        self.repository.route_from(host, self.lab.engine.testbed.bridge_ip)

    def add_files(self, source):
        """Put the repository's key and the CNI manifest into a package's
        source directory (``lab.build_package``'s ``transform``)."""
        for relative, content in (
                (apt_repo.KEY_FILE,
                 self.repository.key.public_armored.decode()),
                (apt_repo.CNI_FILE, virtual_vnf.CALICO_STAND_IN)):
            path = os.path.join(source, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as stream:
                stream.write(content)

    def build_package(self, output_dir, api='v2', kubernetes_version=None,
                      vnfd_id=None):
        """``lab.build_package`` with the repository's files: (VNFD id,
        zip file)."""
        return self.lab.build_package(
            output_dir, api=api, transform=self.add_files,
            kubernetes_version=kubernetes_version, vnfd_id=vnfd_id)

    def instantiate_request(self, vim_id, sample, api='v2', version=None):
        """The sample request (logins by key file) installing from the
        repository: from ``version``'s minor's (default: the install
        script's)."""
        request = self.lab.instantiate_request(vim_id, sample=sample,
                                               api=api, login='key')
        offline = apt_repo.offline_params(self.repository)
        if version is not None:
            offline['apt_repository_url'] = self.repository.url_for(version)
        request['additionalParams'][ROOT]['offline'] = offline
        return request


def next_minor_request(lab, vnfd_id):
    """The ChangeCurrentVnfPackage request to the package ``vnfd_id``:
    the node logins of the sample requests (v2 keeps no password), no
    server replaced."""
    logins = lab.sample_request('scale_out_worker.json', 'v2',
                                login='key')['additionalParams']
    return {'vnfdId': vnfd_id, 'additionalParams': dict(
        logins, upgrade_type='RollingUpdate', vdu_params=[])}


def script_version(package_version):
    """A ``build_package`` transform: the copy's install script installs
    ``package_version``, also a minor ``package --kubernetes-version``
    refuses to build (a package an upgrade must refuse)."""
    def transform(source):
        with open(os.path.join(source, SCRIPT), 'wb') as stream:
            stream.write(standins.script_at(package_version))
    return transform


def next_minor():
    """(package version, kubelet version) of the next minor's package."""
    version = standins.next_minor()
    return version, standins.kubernetes_version(version)
