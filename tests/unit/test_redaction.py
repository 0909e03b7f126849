from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import remote


def test_secrets_and_url_credentials_are_hidden():
    text = ('apt: cannot reach http://user1:password1@host1:3128 '
            'with password hunter2')
    hidden = remote.redact(text, secrets=('hunter2',))
    assert 'password1' not in hidden and 'hunter2' not in hidden
    assert 'http://***@host1:3128' in hidden


def test_command_error_keeps_the_end_of_long_output():
    error = exceptions.RemoteCommandError(
        '10.0.0.1', 'apt-get install x', 100, '', 'noise\n' * 1000 + 'E: boom')
    assert str(error).endswith('E: boom')
    assert len(str(error)) < 2200
