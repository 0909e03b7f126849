"""The test hosts' block devices (testbed.hosts)."""

import os
import subprocess

from testbed import polling


class Volume:
    """A "Cinder volume": a sparse file attached to a loop device."""

    def __init__(self, image, size_mb):
        self.image = image
        self.size_mb = size_mb
        self.loop = None

    def attach(self):
        with open(self.image, 'wb') as f:
            f.truncate(self.size_mb * 1024 * 1024)
        self.loop = subprocess.run(
            ['losetup', '--find', '--show', self.image], check=True,
            capture_output=True, text=True).stdout.strip()

    @property
    def devno(self):
        rdev = os.stat(self.loop).st_rdev
        return f'{os.major(rdev)}:{os.minor(rdev)}'

    def detach(self):
        """Free the loop device; wait until the kernel has released it."""
        if self.loop is None:
            return
        subprocess.run(['losetup', '-d', self.loop], check=True,
                       capture_output=True)
        bound = f'/sys/block/{os.path.basename(self.loop)}/loop/backing_file'
        polling.wait_until(lambda: not os.path.exists(bound),
                           f'{self.loop} to detach')
        self.loop = None
