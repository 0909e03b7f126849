"""Which kubectl the tests drive, and its version."""

import functools
import glob
import json
import os
import re
import shutil
import subprocess
from typing import Optional

GCLOUD_KUBECTL_DIR = '/usr/lib/google-cloud-sdk/bin'


def kubectl_binary() -> Optional[str]:
    """Return the kubectl to test with, or None if this machine has none.

    $KUBECTL wins. Otherwise /usr/bin/kubectl (here the Google Cloud SDK
    dispatcher, which picks a kubectl matching the server's /version), then
    kubectl on PATH, then the newest versioned Cloud SDK binary.
    """
    override = os.environ.get('KUBECTL')
    if override:
        return override
    versioned = [path for path in
                 glob.glob(os.path.join(GCLOUD_KUBECTL_DIR, 'kubectl.1.*'))
                 if re.search(r'\.1\.\d+$', path)]
    versioned.sort(key=lambda path: int(path.rsplit('.', 1)[1]),
                   reverse=True)
    for candidate in ['/usr/bin/kubectl', shutil.which('kubectl'),
                      *versioned]:
        if candidate and _client_version(candidate):
            return candidate
    return None


def kubectl_version(binary: Optional[str] = None) -> Optional[str]:
    """Return the gitVersion of ``kubectl version --client`` (for reports).

    For the Cloud SDK dispatcher this is the dispatcher's own version; for a
    v1.32 server it runs its built-in kubectl of that same version.
    """
    binary = binary or kubectl_binary()
    return _client_version(binary) if binary else None


@functools.lru_cache(maxsize=None)
def _client_version(binary: str) -> Optional[str]:
    try:
        result = subprocess.run(
            [binary, 'version', '--client', '-o', 'json'],
            capture_output=True, text=True, timeout=30, check=True)
        return json.loads(result.stdout)['clientVersion']['gitVersion']
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None
