"""The Tacker lab's private MariaDB (testbed/mariadb.py)."""

import shutil

import pytest

from testbed import mariadb
from testbed import processes


@pytest.fixture
def database(tmp_path):
    if not shutil.which('mariadb-install-db'):
        pytest.skip('mariadb-server is not installed '
                    '(testbed/install-deps.sh)')
    for sub in ('mysql', 'run', 'logs'):
        (tmp_path / sub).mkdir()
    server = mariadb.MariaDB(lambda *parts: str(tmp_path.joinpath(*parts)))
    yield server
    server.stop()


def test_a_failed_install_names_the_servers_own_errors(database, tmp_path):
    """mariadb-install-db ends a failed bootstrap with ~30 lines of
    advice; the error must carry what mariadbd printed before them."""
    (tmp_path / 'mysql' / 'ibdata1').write_bytes(b'\xff' * 65536)
    with pytest.raises(processes.ServiceError) as failure:
        database.start()
    message = str(failure.value)
    install_log = tmp_path / 'logs' / 'mariadb-install.log'
    assert str(install_log) in message
    server_errors = [line for line in install_log.read_text().splitlines()
                     if '[ERROR]' in line]
    assert server_errors
    assert all(line in message for line in server_errors)
    assert mariadb.INSTALL_ADVICE not in message
    assert not processes.alive(processes.read_pid(database.pid_file))


def test_a_started_server_serves_tackers_database_and_starts_once(
        database):
    database.start()
    pid = processes.read_pid(database.pid_file)
    database.start()  # answers already: nothing is started again
    assert processes.read_pid(database.pid_file) == pid
    result = database.sql("SELECT COUNT(*) FROM mysql.global_priv "
                          "WHERE User = '%s'" % mariadb.DB_USER)
    assert result.returncode == 0 and result.stdout.split()[-1] == '1'
    database.stop()
    assert not processes.alive(pid)
