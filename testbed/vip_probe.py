"""A probe of an HA cluster's API server through its VIP, every second,
while an operation (an upgrade) runs: the times nothing answered."""

import ssl
import threading
import time
import urllib.error
import urllib.request

from kubernetes_mgmt_pv.cluster import ha


class VipProbe(object):
    """GET /healthz through the VIP every second, in a thread; use as a
    context manager. ``answers``: how many times an API server answered;
    ``silences``: (time, error) of each time nothing did."""

    def __init__(self, vip, port=ha.FRONTEND_PORT):
        self.url = 'https://%s:%d/healthz' % (vip, port)
        self.answers, self.silences = 0, []
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        # Straight to the VIP, whatever proxy the environment names.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=context))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='vip-probe',
                                        daemon=True)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            try:
                self._opener.open(self.url, timeout=5).read()
                self.answers += 1
            except urllib.error.HTTPError:
                self.answers += 1  # an API server answered
            except OSError as error:
                self.silences.append((time.strftime('%H:%M:%S'), error))
            self._stop.wait(1.0)
