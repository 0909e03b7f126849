"""testbed/vip_probe.py: a VIP where nothing answers is seen as silent."""

import socket
import time

from testbed import vip_probe


def test_nothing_listening_is_a_silence():
    with socket.socket() as bound:  # a port that nothing listens on
        bound.bind(('127.0.0.1', 0))
        port = bound.getsockname()[1]
        with vip_probe.VipProbe('127.0.0.1', port=port) as probe:
            time.sleep(1.5)
    assert probe.answers == 0
    assert len(probe.silences) >= 1
    assert all(isinstance(error, OSError) for _, error in probe.silences)
