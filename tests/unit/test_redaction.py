"""No password, token or URL user info in what the driver raises or logs.

The VIM cases run the real heatclient and keystoneauth1 against a closed
port on 127.0.0.1 and the testbed's Keystone/Heat, and check the message,
the traceback Tacker logs with it (the error's chain) and the log.
"""

import io
import logging
import re
import socket
import traceback
import types

import pytest

from kubernetes_mgmt_pv.doors import tacker_compat
from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import mgmt_driver
from kubernetes_mgmt_pv.openstack import heat
from kubernetes_mgmt_pv.openstack import nova
from kubernetes_mgmt_pv import redaction
from kubernetes_mgmt_pv import step_report
from testbed import openstack_api

VIM_PASSWORD = 'S3cret-pw'
SERVER_ID = '6f0c2e4a-1b2c-4d5e-8f90-a1b2c3d4e5f6'


def test_secrets_and_url_credentials_are_hidden():
    text = ('apt: cannot reach http://user1:password1@host1:3128 '
            'with password hunter2')
    hidden = redaction.redact(text, secrets=('hunter2',))
    assert 'password1' not in hidden and 'hunter2' not in hidden
    assert 'http://***@host1:3128' in hidden


@pytest.mark.parametrize('text, secret, expected', [
    # A whole word, at the start, at the end, the whole text.
    ('login as ubuntu with nfsv failed', 'nfsv',
     'login as ubuntu with *** failed'),
    ('nfsv was refused', 'nfsv', '*** was refused'),
    ('refused: nfsv', 'nfsv', 'refused: ***'),
    ('nfsv', 'nfsv', '***'),
    # Delimited by punctuation, quotes, "=", ":", "/", "@", a final "." or
    # "-" that joins no word.
    ('password=nfsv; user:nfsv@host', 'nfsv', 'password=***; user:***@host'),
    ("env={'PW': 'nfsv'} \"nfsv\" (nfsv)", 'nfsv',
     "env={'PW': '***'} \"***\" (***)"),
    ('from admin/nfsv.', 'nfsv', 'from admin/***.'),
    ('chpasswd <<< ubuntu:nfsv\n', 'nfsv', 'chpasswd <<< ubuntu:***\n'),
    ('-- nfsv -', 'nfsv', '-- *** -'),
    # Inside a longer word: kept.
    ('apt-get install nfsv-common', 'nfsv', 'apt-get install nfsv-common'),
    ('systemctl start nfsv.service nfsvd', 'nfsv',
     'systemctl start nfsv.service nfsvd'),
    ('mount -t nfsv4 knfsv:/x rpc.nfsv', 'nfsv',
     'mount -t nfsv4 knfsv:/x rpc.nfsv'),
    ('no_nfsv NFSV', 'nfsv', 'no_nfsv NFSV'),
    # A secret with punctuation inside or at an edge.
    ('no user admin with S3cret-pw', 'S3cret-pw', 'no user admin with ***'),
    ('tokenS3cret-pw S3cret-pw-2', 'S3cret-pw',
     'tokenS3cret-pw S3cret-pw-2'),
    # An edge that is no word character needs no delimiter.
    ('x-p@ss! y=p@ss!z', 'p@ss!', 'x-p@ss! y=***z'),
    ('to abcdef.0123456789abcdef:6443', 'abcdef.0123456789abcdef',
     'to ***:6443'),
    # A secret that is a whole URL, and a secret in a URL's user info.
    ('proxy http://u:pw@proxy:3128 down', 'http://u:pw@proxy:3128',
     'proxy *** down'),
    ('GET http://admin:nfsv@host/nfsv-common/nfsv', 'nfsv',
     'GET http://***@host/nfsv-common/***'),
])
def test_a_secret_is_hidden_where_it_stands_as_a_whole_value(text, secret,
                                                             expected):
    assert redaction.redact(text, (secret,)) == expected


def test_a_secret_too_short_to_hide_leaves_the_message_alone():
    text = 'exit 1 after 1 s, exit 12 after 12 s, 123'
    assert redaction.redact(text, ('1', '12', '123')) == text
    assert redaction.redact('pw 1234', ('1234',)) == 'pw ***'


@pytest.mark.parametrize('text', [
    'percent-encoded: http://h/?pw=p%40ss%20w%21',
    'percent-encoded, spaces as "+": pw=p%40ss+w%21',
    'base64: Authorization: Basic cEBzcyB3IQ==',
    'base64 without padding: cEBzcyB3IQ',
    "shell-quoted: echo 'p@ss w!' | chpasswd",
])
def test_the_encoded_forms_of_a_secret_are_hidden(text):
    hidden = redaction.redact(text, ('p@ss w!',))
    for form in ('p%40ss', 'cEBzcyB3IQ', 'p@ss'):
        assert form not in hidden
    assert '***' in hidden


def test_a_shell_quoted_secret_with_a_quote_is_hidden():
    hidden = redaction.redact("run: echo 'it'\"'\"'s-pw' > f", ("it's-pw",))
    assert hidden == 'run: echo *** > f'


@pytest.mark.parametrize('text, expected', [
    ('HTTP_PROXY=user:pw@proxy:3128 apt-get', 'HTTP_PROXY=***@proxy:3128 '
                                              'apt-get'),
    ('https_proxy="u:p@ss@proxy" no_proxy=a@b', 'https_proxy="***@proxy" '
                                                'no_proxy=***@b'),
    ("{'http_proxy': 'u:p@proxy'}", "{'http_proxy': '***@proxy'}"),
    ('http_proxy=proxy:3128', 'http_proxy=proxy:3128'),
    ('http_proxy=http://u:p@proxy', 'http_proxy=http://***@proxy'),
])
def test_proxy_credentials_without_a_scheme_are_hidden(text, expected):
    assert redaction.redact(text) == expected


@pytest.mark.parametrize('text, expected', [
    ('\x1b[31mred\x1b[0m text', 'red text'),
    ('a\rb\x07c\x00d\x7fe\x9bf\x1b]0;title\x07', 'abcdef0;title'),
    ('line 1\n\tline 2', 'line 1\n\tline 2'),
    ('/srv/caf\udce9', '/srv/caf\ufffd'),
])
def test_vm_text_is_made_printable(text, expected):
    assert redaction.redact(text) == expected


@pytest.mark.parametrize('text, expected', [
    ('to http://admin:S3cret-pw@127.0.0.1:5000/v3/auth/tokens: refused',
     'to http://***@127.0.0.1:5000/v3/auth/tokens: refused'),
    ('https://admin:pw@keystone.example.com/v3',
     'https://***@keystone.example.com/v3'),
    # User name alone, no path, upper-case scheme, other schemes.
    ('http://admin@10.0.0.1:5000', 'http://***@10.0.0.1:5000'),
    ('HTTP://Admin:pw@host', 'HTTP://***@host'),
    ('socks5h://u:p@proxy:1080 and git+ssh://git:x@repo/a',
     'socks5h://***@proxy:1080 and git+ssh://***@repo/a'),
    # A raw "@" or ":" in the password, a percent-encoded one.
    ('http://admin:p@ss@host/v3', 'http://***@host/v3'),
    ('http://admin:a:b:c@host:5000/v3', 'http://***@host:5000/v3'),
    ('http://admin:p%40ss%2F@host/v3', 'http://***@host/v3'),
    # IPv6 literal, query and fragment after the host.
    ('http://admin:pw@[fd00::1]:5000/v3', 'http://***@[fd00::1]:5000/v3'),
    ('http://admin:pw@host?x=1#f', 'http://***@host?x=1#f'),
    # Quoted inside a repr, two URLs in one line.
    ("url='http://admin:pw@host/v3'", "url='http://***@host/v3'"),
    ('http://a:1@h1/x -> http://b:2@h2/y',
     'http://***@h1/x -> http://***@h2/y'),
    # Nothing to hide: no user info, an "@" after the path or the host
    # (an e-mail address), no scheme.
    ('http://127.0.0.1:5000/v3', 'http://127.0.0.1:5000/v3'),
    ('http://host/v3?user=a@b', 'http://host/v3?user=a@b'),
    ('http://host:80 ops@example.com', 'http://host:80 ops@example.com'),
    ('admin@host:/srv', 'admin@host:/srv'),
])
def test_url_user_info_is_hidden(text, expected):
    assert redaction.redact(text) == expected


@pytest.mark.parametrize('url, secrets', [
    ('http://admin:S3cret-pw@host/v3', ('S3cret-pw',)),
    ('http://admin:p%40ss@host/v3', ('p%40ss', 'p@ss')),
    ('http://admin@host/v3', ()),
    ('http://host/v3', ()),
    ('http://admin:pw@host:notaport/v3', ('pw',)),
    ('', ()),
    (None, ()),
])
def test_the_password_of_a_url_is_a_secret_as_written_and_decoded(url,
                                                                  secrets):
    assert redaction.url_secrets(url) == secrets


def test_a_cause_showing_a_secret_is_not_chained():
    clean, dirty = ValueError('refused'), ValueError('to http://a:b@h/')
    assert redaction.safe_cause(clean) is clean
    assert redaction.safe_cause(dirty) is None
    assert redaction.safe_cause(ValueError('pw S3cret-pw'),
                                (VIM_PASSWORD,)) is None


def test_command_error_keeps_the_end_of_long_output():
    error = exceptions.RemoteCommandError(
        '10.0.0.1', 'apt-get install x', 100, '', 'noise\n' * 1000 + 'E: boom')
    assert str(error).endswith('E: boom')
    assert len(str(error)) < 2200


# -- the VIM's credentials, through the real heatclient and keystoneauth1 --

@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that refuses connections: bound, not listening."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        yield sock.getsockname()[1]


@pytest.fixture
def unreachable_vim(closed_port):
    """VIM access_info whose auth_url carries the user info."""
    return {'auth_url': 'http://admin:%s@127.0.0.1:%d/v3' % (VIM_PASSWORD,
                                                             closed_port),
            'username': 'admin', 'password': VIM_PASSWORD,
            'project_name': 'admin'}


def shown(error):
    """What Tacker keeps and logs of an error: its message and traceback
    with the chain."""
    return ''.join(traceback.format_exception(type(error), error,
                                              error.__traceback__))


def logged(caplog):
    return '\n'.join(record.getMessage() + (record.exc_text or '')
                     for record in caplog.records)


def assert_no_vim_credentials(text):
    assert VIM_PASSWORD not in text
    assert 'admin:' not in text and 'admin@' not in text


def test_unreachable_keystone_error_hides_the_auth_url_user_info(
        unreachable_vim, closed_port, caplog):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')
    client = heat.build_heat_client(unreachable_vim)

    with pytest.raises(exceptions.HeatLookupError,
                       match='cannot connect') as raised:
        heat.HeatStack(client, 'some-stack').cp_address('master_cp')

    message = str(raised.value)
    assert "'master_cp'" in message
    assert 'http://***@127.0.0.1:%d/v3' % closed_port in message
    assert_no_vim_credentials(shown(raised.value))
    assert_no_vim_credentials(logged(caplog))


def test_unreachable_keystone_console_error_hides_the_user_info(
        unreachable_vim, closed_port):
    compute = nova.Compute(heat.build_heat_client(unreachable_vim))

    with pytest.raises(nova.ConsoleOutputError) as raised:
        compute.console_output(SERVER_ID)

    assert raised.value.retry is True
    assert SERVER_ID in str(raised.value)
    assert '127.0.0.1:%d' % closed_port in str(raised.value)
    assert_no_vim_credentials(shown(raised.value))


def test_a_heat_answer_echoing_the_vim_password_is_redacted():
    with openstack_api.FakeOpenStack(password=VIM_PASSWORD) as cloud:
        stack_id = cloud.add_stack('vnf')
        cloud.fail_requests('GET', '.*/resources/master_cp', status=500,
                            message='bad request from admin/%s' % VIM_PASSWORD)
        client = heat.build_heat_client(cloud.access_info())

        with pytest.raises(exceptions.HeatLookupError) as raised:
            heat.HeatStack(client, stack_id).cp_address('master_cp')

    message = str(raised.value)
    assert 'HTTP 500' in message and 'bad request from admin/***' in message
    assert VIM_PASSWORD not in shown(raised.value)


# -- the hook boundary --------------------------------------------------------

def _driver_failing_with(failure, access_info, monkeypatch):
    """A driver whose storage workflow reads the VIM credentials through
    the driver's own seam (Tacker's lookup replaced), then runs failure."""
    monkeypatch.setattr(tacker_compat, 'vim_access_info',
                        lambda context, vnf_instance: dict(access_info))
    driver = mgmt_driver.KubernetesPvMgmtDriver()

    def workflow(context, vnf_instance, request=None):
        failure(driver.vim_access_info(context, vnf_instance))
    driver.cluster.instantiate_end = lambda *args, **kwargs: None
    driver.storage.workflow = workflow
    return driver


def _instantiate_end(driver):
    driver.instantiate_end(None, types.SimpleNamespace(), None, None, None)


def test_a_raw_keystoneauth_error_leaves_a_hook_without_credentials(
        unreachable_vim, closed_port, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')

    def raw_heat_call(access_info):  # not through HeatStack's translation
        heat.build_heat_client(access_info).resources.get(
            stack_id='s', resource_name='r')
    driver = _driver_failing_with(raw_heat_call, unreachable_vim,
                                  monkeypatch)

    with pytest.raises(exceptions.MgmtDriverError) as raised:
        _instantiate_end(driver)

    assert str(raised.value).startswith('instantiate_end failed: ')
    assert '127.0.0.1:%d' % closed_port in str(raised.value)
    assert_no_vim_credentials(shown(raised.value))
    # The traceback is logged, redacted.
    assert 'Traceback' in logged(caplog)
    assert_no_vim_credentials(logged(caplog))


@pytest.mark.parametrize('error_type', [RuntimeError,
                                        exceptions.MgmtDriverError])
def test_the_vim_password_given_alone_never_leaves_a_hook(
        error_type, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')
    access_info = {'auth_url': 'http://127.0.0.1:1/v3', 'username': 'admin',
                   'password': VIM_PASSWORD, 'project_name': 'admin'}

    def fail(access):
        raise error_type('Keystone said: no user admin with %s'
                         % access['password'])
    driver = _driver_failing_with(fail, access_info, monkeypatch)

    with pytest.raises(exceptions.MgmtDriverError) as raised:
        _instantiate_end(driver)

    assert 'no user admin with ***' in str(raised.value)
    assert VIM_PASSWORD not in shown(raised.value)
    assert VIM_PASSWORD not in logged(caplog)
    assert driver.hook_sessions() is None  # the hook's scope is gone


def test_vm_output_leaves_a_hook_printable(caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')

    def fail(access):
        raise exceptions.RemoteCommandError(
            '10.0.0.5', 'cat /etc/exports', 1,
            stderr='\x1b[2J\x1b[31mfake\rline\n/srv/caf\udce9: bad')
    driver = _driver_failing_with(fail, {'password': VIM_PASSWORD},
                                  monkeypatch)

    with pytest.raises(exceptions.MgmtDriverError) as raised:
        _instantiate_end(driver)

    message = str(raised.value)
    assert 'fakeline' in message and '/srv/caf\ufffd: bad' in message
    assert not re.search('[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]',
                         message + logged(caplog))


def test_a_step_detail_with_bytes_that_are_no_utf8_is_logged():
    stream = io.BytesIO()
    handler = logging.StreamHandler(io.TextIOWrapper(stream,
                                                     encoding='utf-8'))
    logger = logging.getLogger('kubernetes_mgmt_pv.step_report')
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        step_report.Report().record('10.0.0.5', 'exports', False,
                                    '/srv/caf\udce9 \x1b[2Jgone')
        handler.flush()
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue().decode('utf-8') == \
        '10.0.0.5: exports unchanged (/srv/caf\ufffd gone)\n'


@pytest.mark.parametrize('error_type', [RuntimeError,
                                        exceptions.MgmtDriverError])
def test_a_token_the_hook_learned_never_leaves_it(error_type, caplog,
                                                  monkeypatch):
    caplog.set_level(logging.DEBUG, logger='kubernetes_mgmt_pv')
    token = 'eyJhbGciOiJSUzI1NiJ9.vim-token'

    def fail(access):
        # As cluster_workflow does once it has read the VIM's token.
        driver.hook_sessions().hide(token)
        raise error_type('kubectl: 401 for "Authorization: Bearer %s"'
                         % token)
    driver = _driver_failing_with(fail, {}, monkeypatch)

    with pytest.raises(exceptions.MgmtDriverError) as raised:
        _instantiate_end(driver)

    assert 'Bearer ***' in str(raised.value)
    assert token not in shown(raised.value) + logged(caplog)


@pytest.mark.parametrize('text, expected', [
    ('round_trippers.go:466] curl -v -XGET -H "Authorization: Bearer '
     'eyJhbGciOi.JSUzI1-NiJ9_x" https://10.0.0.5:6443/api',
     'round_trippers.go:466] curl -v -XGET -H "Authorization: Bearer ***" '
     'https://10.0.0.5:6443/api'),
    ('users:\n- user:\n    token: c2VjcmV0LXRva2Vu==\n',
     'users:\n- user:\n    token: ***\n'),
    ("{'bearer_token': 'eyJhbGciOiJSUzI1NiJ9'}", "{'bearer_token': '***'}"),
    ('token=abcdef.0123456789abcdef', 'token=***'),
    # Words, not tokens.
    ('VIM v1: bearer token changed', 'VIM v1: bearer token changed'),
    ('the token Secret has no token: retry', 'the token Secret has no '
                                             'token: retry'),
])
def test_tokens_the_driver_never_read_are_hidden(text, expected):
    assert redaction.redact(text) == expected


def test_a_step_error_showing_a_secret_keeps_its_class_and_step(
        monkeypatch):
    """A node whose login is ubuntu/ubuntu: the message shows the user
    name, which is the password. It leaves as the same NodeStepError, step
    and hosts readable (the v2 door reports them), every text redacted."""
    access_info = {'auth_url': 'http://127.0.0.1:1/v3', 'username': 'admin',
                   'password': 'ubuntu', 'project_name': 'admin'}

    def fail(access):
        raise exceptions.NodeStepError('pre-flight check', {
            '10.0.0.7': exceptions.StepError(
                'pre-flight check', '10.0.0.7', exceptions.RemoteConnectError(
                    "authentication failed for user 'ubuntu'"))})
    driver = _driver_failing_with(fail, access_info, monkeypatch)

    with pytest.raises(exceptions.NodeStepError) as raised:
        _instantiate_end(driver)

    error = raised.value
    assert error.step == 'pre-flight check'
    assert list(error.failures) == ['10.0.0.7']
    assert error.failures['10.0.0.7'].host == '10.0.0.7'
    assert "user '***'" in str(error) and "user '***'" in error.reason
    assert 'ubuntu' not in shown(error)
    assert 'ubuntu' not in str(error.failures['10.0.0.7'].cause)
    assert exceptions.failure_of(error).host == '10.0.0.7'
