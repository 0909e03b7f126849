"""The auto-heal monitoring as the operator guide sets it up
(samples/auto-heal/, testbed/monitoring.py): blackbox-exporter probes a
test host's kubelet port, Prometheus fires the sample rule once the
kubelet stopped, and Alertmanager posts the alert to the receiver at
Tacker's path in Alertmanager's webhook format, with the labels
Tacker's plugin reads. The receiver here only records what it gets."""

import http.server
import json
import os
import threading

import pytest

from testbed import hosts
from testbed import monitoring
from testbed import polling

INSTANCE = '0b5a1b7e-3c1d-4f5e-8a9b-2c3d4e5f6a7b'
pytestmark = pytest.mark.skipif(
    bool(hosts.require_testbed() or monitoring.available()),
    reason=str(hosts.require_testbed() or monitoring.available()))
KUBELET = ("python3 -c 'import sys; sys.path.insert(0, \"/usr/lib/testbed\")"
           "; import kubelet_service; kubelet_service.%s()'")


class Receiver(http.server.ThreadingHTTPServer):
    """Records the bodies posted to it (Tacker's place)."""

    def __init__(self):
        self.posts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(handler):
                length = int(handler.headers['Content-Length'])
                self.posts.append((handler.path, json.loads(
                    handler.rfile.read(length))))
                handler.send_response(204)
                handler.end_headers()

            def log_message(handler, *args):
                pass
        super().__init__(('127.0.0.1', 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope='module')
def worker():
    with hosts.Testbed() as testbed:
        yield testbed.add_host('worker', 'worker')


def test_a_stopped_kubelet_fires_the_alert_tacker_reads(worker):
    receiver = Receiver()
    url = 'http://127.0.0.1:%d' % receiver.server_address[1]
    try:
        worker.run(KUBELET % 'start')
        with monitoring.MonitoringStack(url) as stack:
            labels = {'receiver_type': 'tacker', 'function_type': 'auto_heal',
                      'vnf_instance_id': INSTANCE,
                      'vnfc_info_id': 'workerNode-1', 'vdu_id': 'workerNode',
                      'node_role': 'worker'}
            with open(os.path.join(stack.targets_dir, INSTANCE + '.json'),
                      'w') as stream:
                json.dump([{'targets': ['%s:10250' % worker.ip],
                            'labels': labels}], stream)
            polling.wait_until(
                lambda: stack.probed(INSTANCE) == {'workerNode-1': True},
                'the kubelet probed', 30, first_delay=0.1, max_delay=0.5)
            assert not stack.firing() and not receiver.posts
            worker.run(KUBELET % 'stop')
            path, body = polling.wait_until(
                lambda: receiver.posts and receiver.posts[0],
                'the alert posted', 60, first_delay=0.1, max_delay=0.5)
    finally:
        receiver.shutdown()
    assert path == '/alert/auto_healing'
    assert body['status'] == 'firing'
    alert, = body['alerts']
    assert alert['status'] == 'firing'
    assert {key: alert['labels'][key] for key in labels} == labels
    assert alert['labels']['alertname'] == monitoring.ALERT
