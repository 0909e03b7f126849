"""Prometheus, Alertmanager and blackbox-exporter from their Debian
packages, on loopback, configured as the operator guide's "Auto-heal"
section says (samples/auto-heal/), only faster: probes and rules every
second, a short ``for``, no group wait.

The driver writes one file_sd file per VNF instance into
``targets_dir`` ([kubernetes_mgmt_pv] auto_heal_targets_dir); blackbox
probes each target (a VM's kubelet or SSH port, a testbed address);
Prometheus fires the sample's alert; Alertmanager posts it to Tacker's
``/alert/auto_healing``. Nothing here sends an alert itself.
"""

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import yaml

from testbed import polling
from testbed import processes

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'samples', 'auto-heal')
PROMETHEUS = '/usr/bin/prometheus'
ALERTMANAGER = '/usr/bin/prometheus-alertmanager'
BLACKBOX = '/usr/bin/prometheus-blackbox-exporter'
JOB = 'kubernetes-mgmt-pv-auto-heal'
ALERT = 'KubernetesMgmtPvVmDown'


def available():
    """Why this machine cannot run the stack (a skip reason), or None."""
    for binary in (PROMETHEUS, ALERTMANAGER, BLACKBOX):
        if not os.path.exists(binary):
            return '%s is not installed (testbed/install-deps.sh)' % binary
    return None


def _sample(name):
    with open(os.path.join(SAMPLES, name)) as stream:
        return yaml.safe_load(stream)


class MonitoringStack(object):
    """The three services, for the VNF instances of one Tacker."""

    def __init__(self, tacker_url, alert_for='2s', interval='1s'):
        self.tacker_url = tacker_url
        self.alert_for = alert_for
        self.interval = interval
        self.directory = None
        self.ports = {}
        self._processes = {}  # service -> Popen, in start order

    @property
    def targets_dir(self):
        return os.path.join(self.directory, 'targets')

    def url(self, service):
        return 'http://127.0.0.1:%d' % self.ports[service]

    def start(self):
        self.directory = tempfile.mkdtemp(prefix='testbed-monitoring-')
        os.makedirs(self.targets_dir)
        for service in ('blackbox', 'alertmanager', 'prometheus'):
            self.ports[service] = processes.free_port()
        try:
            self._spawn('blackbox', [
                BLACKBOX, '--config.file=' + self._write(
                    'blackbox.yml', _sample('blackbox.yml')),
                '--web.listen-address=127.0.0.1:%d' % self.ports['blackbox']])
            self._spawn('alertmanager', [
                ALERTMANAGER, '--config.file=' + self._alertmanager_config(),
                '--storage.path=' + self._path('alertmanager-data'),
                '--web.listen-address=127.0.0.1:%d'
                % self.ports['alertmanager'],
                '--cluster.listen-address='])  # no gossip port
            self._spawn('prometheus', [
                PROMETHEUS, '--config.file=' + self._prometheus_config(),
                '--storage.tsdb.path=' + self._path('prometheus-data'),
                '--web.listen-address=127.0.0.1:%d'
                % self.ports['prometheus']])
            for service, path in (('blackbox', '/-/healthy'),
                                  ('alertmanager', '/-/ready'),
                                  ('prometheus', '/-/ready')):
                polling.wait_until(
                    lambda: self._answers(service, path),
                    '%s to be ready' % service, timeout=60,
                    log=self._path(service + '.log'))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        for process in reversed(list(self._processes.values())):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._processes = {}
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    # -- what the tests read --------------------------------------------------

    def query(self, expression):
        """The result vector of a PromQL instant query."""
        return self._get_json('prometheus', '/api/v1/query?' +
                              urllib.parse.urlencode({'query': expression}))[
            'data']['result']

    def firing(self):
        """Labels of the sample rule's alerts that fire now."""
        return [alert['labels'] for alert in self._get_json(
            'prometheus', '/api/v1/alerts')['data']['alerts']
            if alert['labels'].get('alertname') == ALERT and
            alert['state'] == 'firing']

    def probed(self, instance_id):
        """{vnfc_info_id: probe_success} of the instance's targets probed
        now."""
        return {sample['metric'].get('vnfc_info_id'):
                sample['value'][1] == '1'
                for sample in self.query(
                    'probe_success{job="%s",vnf_instance_id="%s"}'
                    % (JOB, instance_id))}

    def target_files(self):
        return sorted(os.listdir(self.targets_dir))

    # -- internals ------------------------------------------------------------

    def _path(self, *parts):
        return os.path.join(self.directory, *parts)

    def _write(self, name, document):
        path = self._path(name)
        with open(path, 'w') as stream:
            yaml.safe_dump(document, stream)
        return path

    def _prometheus_config(self):
        config = _sample('prometheus-auto-heal.yml')
        rules = _sample('kubernetes-mgmt-pv-rules.yml')
        for rule in rules['groups'][0]['rules']:
            rule['for'] = self.alert_for
        config['rule_files'] = [self._write('rules.yml', rules)]
        config['global'] = {'scrape_interval': self.interval,
                            'evaluation_interval': self.interval}
        job, = config['scrape_configs']
        job['scrape_interval'] = self.interval
        job['file_sd_configs'] = [{'files': [os.path.join(
            self.targets_dir, '*.json')], 'refresh_interval': self.interval}]
        job['relabel_configs'][-1]['replacement'] = \
            '127.0.0.1:%d' % self.ports['blackbox']
        config['alerting']['alertmanagers'][0]['static_configs'] = [
            {'targets': ['127.0.0.1:%d' % self.ports['alertmanager']]}]
        return self._write('prometheus.yml', config)

    def _alertmanager_config(self):
        config = _sample('alertmanager.yml')
        route, = config['route']['routes']
        route.update(group_wait='0s', group_interval='1s')
        for receiver in config['receivers']:
            for hook in receiver.get('webhook_configs', ()):
                hook['url'] = self.tacker_url + '/alert/auto_healing'
        return self._write('alertmanager.yml', config)

    def _spawn(self, service, argv):
        with open(self._path(service + '.log'), 'ab') as log:
            self._processes[service] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=self.directory)

    def _answers(self, service, path):
        if self._processes[service].poll() is not None:
            raise processes.ServiceError(
                '%s exited, see %s' % (service, self._path(service + '.log')))
        try:
            with urllib.request.urlopen(self.url(service) + path,
                                        timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _get_json(self, service, path):
        with urllib.request.urlopen(self.url(service) + path,
                                    timeout=5) as response:
            return json.load(response)
