"""The Tacker lab's private RabbitMQ node (testbed/rabbitmq.py) and the
ports the testbed's services are given (processes.free_port)."""

import os
import socket
import subprocess
import types

import pytest

from testbed import conductors
from testbed import processes
from testbed import rabbitmq


def test_a_free_port_is_below_the_ephemeral_range_and_bindable():
    with open(processes.PORT_RANGE) as handle:
        ephemeral_start = int(handle.read().split()[0])
    ports = {processes.free_port() for _ in range(20)}
    assert all(processes.LOWEST_PORT <= port < ephemeral_start
               for port in ports)
    assert len(ports) > 1  # picked at random, not the same each time
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', ports.pop()))


@pytest.fixture
def node(tmp_path):
    if not os.path.exists(rabbitmq.SERVER):
        pytest.skip('rabbitmq-server is not installed '
                    '(testbed/install-deps.sh)')
    for sub in ('rabbitmq', 'run', 'logs'):
        (tmp_path / sub).mkdir()
    server = rabbitmq.RabbitMQ(lambda *parts: str(tmp_path.joinpath(*parts)))
    yield server
    server.stop()


def test_a_node_whose_port_was_taken_starts_again_on_other_ports(
        node, monkeypatch):
    """The distribution port is taken between its pick and the VM's
    bind: the VM exits, and the node starts on new ports."""
    taken = socket.create_server(('127.0.0.1', 0))
    taken_port = taken.getsockname()[1]
    picks = [processes.free_port(), taken_port]
    real_free_port = processes.free_port
    monkeypatch.setattr(processes, 'free_port', lambda: picks.pop(0)
                        if picks else real_free_port())
    with taken:
        node.start()
    assert node.dist_port != taken_port
    assert node.ctl('status').returncode == 0
    with socket.create_connection(('127.0.0.1', node.amqp_port), 5):
        pass


def test_a_cli_too_slow_to_answer_means_not_yet(node, monkeypatch):
    """On a loaded machine rabbitmqctl may outlive its own timeout (seen
    in CI): the start keeps waiting instead of failing the lab, and a
    poll of the queues finds none yet."""
    real_ctl = node.ctl
    calls = []

    def slow_first(*args, timeout=60):
        calls.append(args)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(['rabbitmqctl', *args], timeout)
        return real_ctl(*args, timeout=timeout)
    monkeypatch.setattr(node, 'ctl', slow_first)
    node.start()
    assert calls[0][0] == calls[1][0] == 'await_startup'
    assert processes.port_open('127.0.0.1', node.amqp_port)
    service = types.SimpleNamespace(rabbitmq=node)

    def never_answers(*args, timeout=60):
        raise subprocess.TimeoutExpired(['rabbitmqctl', *args], timeout)
    monkeypatch.setattr(node, 'ctl', never_answers)
    assert conductors.Conductors(service).topic_consumers() == {}


def test_a_port_is_open_only_while_a_server_listens():
    with socket.create_server(('127.0.0.1', 0)) as server:
        port = server.getsockname()[1]
        assert processes.port_open('127.0.0.1', port)
    assert not processes.port_open('127.0.0.1', port)
