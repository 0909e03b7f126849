"""The Tacker lab's private MariaDB (testbed/mariadb.py)."""

import os
import shutil
import subprocess

import pytest

from testbed import mariadb
from testbed import processes


def _server(workdir):
    if not shutil.which('mariadb-install-db'):
        pytest.skip('mariadb-server is not installed '
                    '(testbed/install-deps.sh)')
    for sub in ('mysql', 'run', 'logs'):
        (workdir / sub).mkdir(parents=True)
    return mariadb.MariaDB(lambda *parts: str(workdir.joinpath(*parts)))


@pytest.fixture
def database(tmp_path):
    server = _server(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def second_database(tmp_path):
    server = _server(tmp_path / 'second')
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
        database, monkeypatch):
    """...and no command line carries the password of Tacker's user:
    every user of the machine can read command lines."""
    command_lines = []

    class RecordingPopen(subprocess.Popen):
        def __init__(self, args, *more, **options):
            command_lines.append(' '.join(args))
            super().__init__(args, *more, **options)
    monkeypatch.setattr(subprocess, 'Popen', RecordingPopen)
    database.start()
    assert command_lines
    assert not [line for line in command_lines if database.password in line]
    pid = processes.read_pid(database.pid_file)
    database.start()  # answers already: nothing is started again
    assert processes.read_pid(database.pid_file) == pid
    result = database.sql("SELECT COUNT(*) FROM mysql.global_priv "
                          "WHERE User = '%s'" % mariadb.DB_USER)
    assert result.returncode == 0 and result.stdout.split()[-1] == '1'
    database.stop()
    assert not processes.alive(pid)


def test_a_starting_server_leaves_another_servers_temporary_tables(
        database, second_database):
    """A MariaDB deletes the "#sql*" files of its tmpdir when it starts;
    in a shared /tmp those are another server's temporary tables (CI: a
    second lab's bootstrap failed on its own vanished table)."""
    database.start()
    database.sql('CREATE DATABASE scratch')
    session = subprocess.Popen(
        ['mariadb', '--no-defaults', '-uroot', '--unbuffered',
         '--socket=%s' % database.socket, 'scratch'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        session.stdin.write('CREATE TEMPORARY TABLE kept (a INT) '
                            'ENGINE=Aria; SELECT "created";\n')
        session.stdin.flush()
        assert session.stdout.readline().split() == ['created']
        assert session.stdout.readline().split() == ['created']
        table_files = [name for name in os.listdir(database.tmpdir)
                       if name.startswith('#sql')]
        assert table_files

        second_database.start()

        assert set(table_files) <= set(os.listdir(database.tmpdir))
        output, _ = session.communicate(
            'DROP TEMPORARY TABLE kept;\n', timeout=30)
    finally:
        if session.poll() is None:
            session.kill()
    assert session.returncode == 0, output
