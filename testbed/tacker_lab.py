"""The user guide's set-up on this machine: real Tacker, the Heat engine
and the testbed.

``TackerLab`` runs a TackerService (testbed.tacker_service), the fake
Keystone/Heat/Nova (testbed.openstack_api) whose Heat is a HeatEngine
booting testbed hosts, and a TackerClient; its helpers are the operator's
steps (VIM, package, requests, LCM) and checks (SSH, kubectl).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid

from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session

from testbed import heat_engine
from testbed import hosts
from testbed import monitoring
from testbed import nfs_fuse
from testbed import openstack_api
from testbed import polling
from testbed import processes
from testbed import tacker_client
from testbed import tacker_service
from testbed import virtual_vnf

SAMPLE = os.path.join(tacker_service.ROOT, 'samples', 'kubernetes_pv_vnf')
REQUESTS = os.path.join(tacker_service.ROOT, 'samples', 'requests')
REQUESTS_BY_API = {'v1': REQUESTS, 'v2': REQUESTS + '-v2'}
# `kubernetes-mgmt-pv package` says the VNFD id it wrote.
PRINTED_VNFD_ID = re.compile(r'^VNFD id: (\S+)$', re.M)
# The "Neutron network" of the testbed bridge, as the request names it.
TESTBED_NETWORK_ID = 'a0e0c0e0-7e57-4bed-8000-000000000001'
OP_TIMEOUT = 1800
AUTO_HEAL_FOR = '2s'  # the sample rule's "for" (2m)
AUTO_HEAL_TIMER = 2  # Tacker's [prometheus_plugin] timer_interval (20 s)
# The testbed guests' passwords, by login of the requests.
PASSWORDS = {'master_node': hosts.Testbed.password,
             'worker_node': hosts.Testbed.password,
             'storage_server': virtual_vnf.STORAGE_PASSWORD}
# The key files the sample requests name (ssh_key), which the lab places
# in the conductor's ssh_key_dir, and the Nova keypairs of the same names
# (their public halves) the requests' additionalParams.nfv name.
SAMPLE_KEY_FILES = ('cluster-nodes', 'storage-server')
# The Glance image the sample VNFD names: here the seeds' prepared image
# (testbed.cloud_init.PREPARED: password logins, no authorized key), as an
# operator taking the password route registers it, so that the modules
# logging in by password run; a key login needs the keypair all the same.
SAMPLE_IMAGE = 'ubuntu-22.04-server-cloudimg-amd64'
SERVICE_USER, SERVICE_PROJECT = 'tacker', 'service'
# Options of TEST_OPTIONS the lab leaves at the driver's defaults.
BOOT_WINDOW_OPTIONS = ('ssh_connect_retries', 'ssh_retry_backoff',
                       'ssh_connect_timeout', 'console_key_timeout')


def own_vnfd_id():
    """A VNFD id for `package --vnfd-id` (a random UUID): Tacker takes a
    VNFD id once, and test modules that share a lab onboard the same
    build of the sample, each under its own id, as an operator onboarding
    one package twice would."""
    return str(uuid.uuid4())


class TackerLab(object):
    """The whole user-guide set-up on this machine: real Tacker
    (TackerService), the fake Keystone/Heat/Nova whose Heat is a HeatEngine
    booting testbed hosts, and helpers for the operator's steps and checks.
    """

    def __init__(self, workdir=None, driver_options=None, log=None,
                 conductor_count=1, stock_image=False):
        self.log = log or (lambda message: None)
        # stock_image: the VMs lack the NFS packages, as the user guide's
        # image does (the driver installs them); by default they come
        # with them, and only the modules testing that installation (or
        # the demo) boot the stock image (lab.engine.stock_image).
        self.engine = heat_engine.HeatEngine(prepared_images=[SAMPLE_IMAGE],
                                             stock_image=stock_image)
        self.cloud = openstack_api.FakeOpenStack(heat_engine=self.engine)
        # The driver's own boot window (SSH retries, the console's host
        # keys): the engine's VMs boot after ACTIVE, as Nova's do.
        options = {name: value for name, value in
                   virtual_vnf.TEST_OPTIONS.items()
                   if name not in BOOT_WINDOW_OPTIONS}
        options.update(driver_options or {})
        self.service = tacker_service.TackerService(
            workdir=workdir, driver_options=options,
            conductor_count=conductor_count, extra_conf={
                # A v2 CNF waits this long (default 500 s) for its
                # resources to be ready in the test Kubernetes API server:
                # its pod is Running once a node agent mounted its PV over
                # NFS, which took over 60 s while every env of `make
                # test` shared the cores.
                'v2_vnfm': {'kubernetes_vim_rsc_wait_timeout': 300}})
        # Auto-heal as the operator guide sets it up, with shorter waits:
        # Prometheus fires after AUTO_HEAL_FOR, Tacker heals
        # timer_interval later.
        self.monitoring = monitoring.MonitoringStack(
            None, alert_for=AUTO_HEAL_FOR)
        self.service.extra_conf['prometheus_plugin'] = {
            'auto_healing': True, 'timer_interval': AUTO_HEAL_TIMER}
        self.service.driver_options['auto_heal_startup_grace'] = 10
        self.client = None
        self.timings = {}

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        started = time.monotonic()
        try:
            self.engine.start()
            self.cloud.start()
            # The operator's steps: the nodes' key in ssh_key_dir, a file
            # of the conductor's user (this one), mode 0600, and its
            # public half as Nova keypairs (openstack keypair create
            # --public-key).
            testbed = self.engine.testbed
            self.service.driver_options['ssh_key_dir'] = \
                testbed.place_client_key(os.path.join(
                    testbed.workdir, 'conductor-keys'), *SAMPLE_KEY_FILES)
            for name in SAMPLE_KEY_FILES:
                self.cloud.add_keypair(name, testbed.client_public_key())
            self.service.extra_conf['keystone_authtoken'] = \
                self.service_user()
            self.service.api_port = processes.free_port()
            self.monitoring.tacker_url = self.service.api_url
            self.monitoring.start()
            self.service.driver_options['auto_heal_targets_dir'] = \
                self.monitoring.targets_dir
            self.service.start()
        except BaseException:
            self.stop()
            raise
        self.client = tacker_client.TackerClient(self.service.api_url)
        self.timings['setup'] = round(time.monotonic() - started, 1)
        return self

    def service_user(self):
        """The guide's step: Tacker's service user (``tacker`` with the
        ``member`` role on project ``service``) in ``[keystone_authtoken]``
        of every Tacker host, which the key manager authenticates."""
        password = uuid.uuid4().hex
        self.cloud.add_account(SERVICE_USER, password, SERVICE_PROJECT)
        return {'auth_url': self.cloud.auth_url, 'username': SERVICE_USER,
                'password': password, 'project_name': SERVICE_PROJECT,
                'user_domain_name': self.cloud.user_domain_name,
                'project_domain_name': self.cloud.project_domain_name}

    def stop(self):
        errors = []
        for step in (self.service.stop, self.monitoring.stop,
                     self.cloud.stop, self.engine.stop):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - stop the others
                errors.append(error)
        if errors:
            raise errors[0]

    @property
    def workdir(self):
        return self.service.workdir

    def memory(self):
        """Resident memory (MB) of the services and of this process (which
        runs the fake OpenStack, the Heat engine and the API servers)."""
        result = self.service.memory()
        result['test process'] = processes.rss_mb(os.getpid())
        return result

    # -- onboarding -----------------------------------------------------------

    def register_openstack_vim(self, name='testbed-openstack'):
        """POST /v1.0/vims: the fake Keystone as the default VIM."""
        body = {'vim': {
            'type': 'openstack', 'name': name, 'is_default': True,
            'description': 'the testbed (fake Keystone/Heat/Nova)',
            'auth_url': self.cloud.auth_url,
            'auth_cred': {'username': self.cloud.username,
                          'password': self.cloud.password,
                          'user_domain_name': self.cloud.user_domain_name,
                          'cert_verify': 'False'},
            'vim_project': {
                'name': self.cloud.project_name,
                'project_domain_name': self.cloud.project_domain_name}}}
        return self.client.post('/v1.0/vims', body, expect=201).body['vim']

    def build_package(self, output_dir, api='v1', transform=None,
                      kubernetes_version=None, vnfd_id=None):
        """The sample package, built with `kubernetes-mgmt-pv package
        --api v1|v2` of Tacker's venv (the driver the conductor runs), as
        the CLI writes it: (the VNFD id it printed, zip file).
        ``transform(source_dir)`` may change a copy of the sample first;
        ``kubernetes_version``, ``vnfd_id``: its --kubernetes-version and
        --vnfd-id (Tacker takes a VNFD id once: a module sharing the lab
        with others that onboard the same build gives one)."""
        source = SAMPLE
        os.makedirs(output_dir, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix='source-', dir=output_dir)
        try:
            if transform is not None:
                source = os.path.join(scratch, 'kubernetes_pv_vnf')
                shutil.copytree(SAMPLE, source)
                transform(source)
            return self.zip_package(
                source, os.path.join(output_dir, 'kubernetes_pv_vnf-%s%s.zip'
                                     % (api, '-' + kubernetes_version
                                        if kubernetes_version else '')),
                api=api, kubernetes_version=kubernetes_version,
                vnfd_id=vnfd_id)
        finally:
            shutil.rmtree(scratch)

    def zip_package(self, source, output, api='v1', kubernetes_version=None,
                    vnfd_id=None):
        """`kubernetes-mgmt-pv package --source DIR --output ZIP --api`
        [--kubernetes-version] [--vnfd-id]: (the VNFD id it printed,
        ZIP)."""
        options = []
        if kubernetes_version:
            options += ['--kubernetes-version', kubernetes_version]
        if vnfd_id:
            options += ['--vnfd-id', vnfd_id]
        result = subprocess.run(
            [self.service.bin('kubernetes-mgmt-pv'), 'package', '--source',
             source, '--output', output, '--api', api] + options,
            capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise processes.ServiceError(
                'kubernetes-mgmt-pv package failed: %s' % result.stderr)
        printed = PRINTED_VNFD_ID.findall(result.stdout)
        if len(printed) != 1:
            raise processes.ServiceError(
                'kubernetes-mgmt-pv package printed no VNFD id: %s'
                % result.stdout)
        return printed[0], output

    def instantiate_request(self, vim_id, sample='instantiate_simple.json',
                            api='v1', login='password'):
        """The sample request (samples/requests, or requests-v2 for
        Tacker's v2 API), adapted where it must be for this cloud: the
        network ids (the testbed network), the VIM id, the logins
        (``sample_request``), every export_to (the sample's
        10.10.0.0/24 is the user guide's network; the nodes here are on
        the testbed's subnet), the security groups' management CIDR
        (Tacker's host here: the runner's address on the bridge) and the
        storage classes' mount options (NFSv4.0, all the node agents'
        NFS client speaks)."""
        request = self.sample_request(sample, api, login)
        for link in request.get('extVirtualLinks', []):
            link['resourceId'] = TESTBED_NETWORK_ID
        vims = request.get('vimConnectionInfo', [])
        for info in vims.values() if isinstance(vims, dict) else vims:
            info['vimId'] = vim_id
        storage = request['additionalParams'][
            'k8s_cluster_installation_param']['storage_server']
        for export in storage['nfs_server_setup_params']:
            export['export_to'] = self.engine.testbed.subnet
        for storage_class in storage.get('storage_classes', []):
            storage_class['mount_options'] = list(
                nfs_fuse.V4_0_MOUNT_OPTIONS)
        if 'nfv' in request['additionalParams']:
            request['additionalParams']['nfv']['management_cidr'] = \
                self.management_cidr
        return request

    @property
    def management_cidr(self):
        """Where Tacker's requests come from: the runner's bridge
        address."""
        return self.engine.testbed.bridge_ip + '/32'

    @staticmethod
    def sample_path(*parts):
        return os.path.join(SAMPLE, *parts)

    @staticmethod
    def sample_request(name, api='v1', login='password'):
        """A sample request. Its logins name the key files the lab places
        in ssh_key_dir (``login='key'``), or become the testbed's
        passwords (the default: the modules that do not check the key
        logins prove that password logins work)."""
        with open(os.path.join(REQUESTS_BY_API[api], name)) as handle:
            request = json.load(handle)
        root = (request.get('additionalParams') or {}).get(
            'k8s_cluster_installation_param') or {}
        if login == 'password':
            for role, password in PASSWORDS.items():
                node = root.get(role)
                if isinstance(node, dict) and node.pop('ssh_key', None):
                    node['password'] = password
        return request

    # -- LCM ------------------------------------------------------------------

    def lcm(self, instance_id, operation, body, timeout=OP_TIMEOUT):
        """POST an LCM operation and wait for its final state; returns the
        operation occurrence (with 'seconds')."""
        started = time.monotonic()
        response = self.client.post('/vnflcm/v1/vnf_instances/%s/%s'
                                    % (instance_id, operation), body,
                                    expect=202)
        occ = self.client.wait_op(self.client.op_occ_id(response), timeout)
        occ['seconds'] = round(time.monotonic() - started, 1)
        self.log('%s: %s in %ss%s' % (
            operation, occ['operationState'], occ['seconds'],
            '' if occ['operationState'] == 'COMPLETED' else ' (%s)' % (
                (occ.get('error') or {}).get('detail'))))
        return occ

    def stop_server(self, server_id):
        """openstack server stop, through Nova's API."""
        # python-novaclient comes with Tacker (its env runs the lab).
        from novaclient import client as nova_client
        access = self.cloud.access_info()
        auth = v3.Password(
            auth_url=access['auth_url'], username=access['username'],
            password=access['password'], project_name=access['project_name'],
            user_domain_name=access['user_domain_name'],
            project_domain_name=access['project_domain_name'])
        nova = nova_client.Client('2.1',
                                  session=ks_session.Session(auth=auth))
        nova.servers.stop(server_id)

    def op_action(self, op_id, action, final=('FAILED', 'ROLLED_BACK',
                                              'COMPLETED', 'FAILED_TEMP'),
                  timeout=OP_TIMEOUT):
        """POST /vnf_lcm_op_occs/{id}/{retry|rollback|fail}; returns the
        occurrence once final again."""
        # No body at all: Tacker's handlers of these take none (a JSON
        # body, even {}, is a 500 TypeError).
        response = self.client.request(
            'POST', '/vnflcm/v1/vnf_lcm_op_occs/%s/%s' % (op_id, action),
            expect=(200, 202))
        if action == 'fail':
            return response.body
        # The state leaves FAILED_TEMP first, then reaches a final one.
        path = '/vnflcm/v1/vnf_lcm_op_occs/%s' % op_id
        polling.wait_until(
            lambda: self.client.get(path)['operationState'] != 'FAILED_TEMP',
            '%s of %s to start' % (action, op_id), 60, first_delay=0.2,
            max_delay=1.0)
        return self.client.wait_op(op_id, timeout, final=final)

    def instance(self, instance_id):
        return self.client.get('/vnflcm/v1/vnf_instances/%s' % instance_id)

    def vnfcs(self, instance_id, vdu_id=None):
        info = self.instance(instance_id).get('instantiatedVnfInfo') or {}
        return [vnfc for vnfc in info.get('vnfcResourceInfo', [])
                if vdu_id in (None, vnfc['vduId'])]

    # -- what the operator checks ---------------------------------------------

    def stack(self, instance_id):
        """The live stack of a VNF instance: ``vnflcm_<id>`` (Tacker v1)
        or ``vnf-<id>`` (v2), or None."""
        return self.cloud.find_stack('vnflcm_%s' % instance_id) or \
            self.cloud.find_stack('vnf-%s' % instance_id)

    def cp_address(self, instance_id, cp_name='storage_server_CP'):
        """`openstack stack resource show vnflcm_<id> <cp>` | ip_address."""
        stack = self.stack(instance_id)
        return stack.resources[cp_name].attributes['fixed_ips'][0][
            'ip_address']

    def host_at(self, address):
        for host in self.engine.testbed.hosts.values():
            if host.ip == address:
                return host
        raise LookupError('no testbed host at %s' % address)

    def masters(self):
        return sorted((h for h in self.engine.testbed.hosts.values()
                       if h.role == 'master'), key=lambda h: h.name)

    def ssh(self, host, command):
        """Run a command over SSH as the guide's user (ubuntu), like an
        operator logged in to the VM; returns stdout."""
        client = host.ssh_client()
        try:
            _, stdout, stderr = client.exec_command(command, timeout=60)
            output = stdout.read().decode()
            status = stdout.channel.recv_exit_status()
            if status:
                raise processes.ServiceError('%s on %s: exit %s: %s' % (
                    command, host.name, status, stderr.read().decode()))
            return output
        finally:
            client.close()

    def storage_checks(self, instance_id):
        """df -h and sudo exportfs -v on the Storage server."""
        host = self.host_at(self.cp_address(instance_id))
        return {'address': host.ip,
                'df': self.ssh(host, 'df -h'),
                'exportfs': self.ssh(host, 'sudo exportfs -v')}

    def kubectl(self, *args, master=None):
        master = master or self.masters()[0]
        return self.ssh(master, 'kubectl ' + ' '.join(
            shlex.quote(a) for a in args))

    def cluster_checks(self):
        return {'pv': self.kubectl('get', 'pv'),
                'nodes': self.kubectl('get', 'nodes')}

    def persistent_volumes(self):
        items = json.loads(self.kubectl('get', 'pv', '-o', 'json'))['items']
        return {item['metadata']['name']: item for item in items}

    def nodes(self):
        items = json.loads(self.kubectl('get', 'nodes', '-o', 'json'))[
            'items']
        return {item['metadata']['name']: item for item in items}

    def vims(self):
        return self.client.get('/v1.0/vims')['vims']
