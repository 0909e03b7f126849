"""Test scaffolding: a Tacker v2 management script that only records.

Tacker's v2 conductor runs the script a VNFD's ``Vnflcm`` interface names
as ``python <script>`` with one pickled dict on stdin (its
``_exec_mgmt_driver_script``). This script, copied into a test package as
``Scripts/record_hooks.py`` next to a ``record_dir`` file naming a
directory, writes each dict it receives there unchanged
(``<nanoseconds>-<operation>.pickle``, mode 0600: the dict holds the VIM
password) and exits 0 with nothing on stdout, so the operation goes on as
if no script had run. Standard library only: it runs with the conductor's
interpreter, in a copy of the package that Tacker deletes afterwards.
"""

import os
import pickle
import sys
import time


def main(stdin=None):
    script_dict = pickle.load(stdin or sys.stdin.buffer)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, 'record_dir')) as handle:
        directory = handle.read().strip()
    name = '%d-%s.pickle' % (time.time_ns(), script_dict['operation'])
    temporary = os.path.join(directory, '.' + name)
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                      0o600), 'wb') as handle:
        pickle.dump(script_dict, handle)
    os.rename(temporary, os.path.join(directory, name))
    return 0


if __name__ == '__main__':
    sys.exit(main())
