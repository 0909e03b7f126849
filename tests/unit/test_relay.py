"""remote/relay.py with channels that behave like paramiko's."""

import contextlib
import threading

import pytest

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv.remote import relay


class Channel(object):
    def __init__(self, stdout=(), stderr=b'', status=0, broken=False):
        self.stdout, self.stderr = list(stdout), [stderr]
        self.status, self.broken = status, broken
        self.received, self.shut = [], False
        self.status_event = threading.Event()
        self.status_event.set()

    def recv(self, size):
        assert size == relay.CHUNK
        return self.stdout.pop(0) if self.stdout else b''

    def recv_stderr(self, size):
        return self.stderr.pop(0) if self.stderr else b''

    def sendall(self, data):
        if self.broken:
            raise OSError('Socket is closed')
        self.received.append(data)

    def shutdown_write(self):
        self.shut = True

    def exit_status_ready(self):
        return self.broken

    def recv_exit_status(self):
        return self.status

    def gettimeout(self):
        return 1.0


class Host(object):
    def __init__(self, host, channel):
        self.host, self.opened, self.ran = host, channel, None

    @contextlib.contextmanager
    def channel(self, argv, sudo=False):
        assert sudo
        self.ran = argv
        yield self.opened

    def failure(self, description, result):
        return exceptions.RemoteCommandError(
            self.host, description, result.exit_status, result.stdout,
            result.stderr)


def test_the_source_output_goes_to_the_target_in_chunks():
    source = Host('10.0.0.11', Channel([b'a' * relay.CHUNK, b'b']))
    target = Host('10.0.0.5', Channel([b'listing\n']))
    assert relay.copy(source, ['cat', 'x'], target, ['sh'], 'copy') == \
        'listing\n'
    assert target.opened.received == [b'a' * relay.CHUNK, b'b']
    assert target.opened.shut
    assert (source.ran, target.ran) == (['cat', 'x'], ['sh'])


@pytest.mark.parametrize('source, target, host, shown', [
    # cat failed on the Master: named, whatever the target says.
    (Channel(stderr=b'cat: x: No such file', status=1), Channel(status=1),
     '10.0.0.11', ['No such file']),
    # The target refused what arrived.
    (Channel([b'data']), Channel(stderr=b'the copy arrived incomplete',
                                 status=1), '10.0.0.5', ['incomplete']),
    # The target ended before the stream did: its own reason.
    (Channel([b'data']), Channel(stderr=b'/volume is not mounted', status=3,
                                 broken=True),
     '10.0.0.5', ['exit status 3', 'not mounted']),
    # The stream broke otherwise.
    (Channel([b'data']), Channel(broken=True), '10.0.0.5',
     ['stream broken']),
])
def test_the_failed_side_is_named_with_its_reason(source, target, host,
                                                  shown):
    with pytest.raises(exceptions.RemoteCommandError) as raised:
        relay.copy(Host('10.0.0.11', source), ['cat', 'x'],
                   Host('10.0.0.5', target), ['sh'], 'copy')
    assert raised.value.host == host
    for text in shown:
        assert text in str(raised.value)
