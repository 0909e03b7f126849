"""What Nova and cloud-init make of a server on a real cloud: the guest's
host name, its console log and its logins.

Host names, as on the first real cloud (Nova + cloud-init):

* Heat gives Nova the server's ``name`` property as the display name; a
  server without one is named ``<stack name>-<resource name>-<short id>``.
  Every member of a scaling group is built from one template, so all of
  them share the name (the sample's ``masterNode``, ``workerNode``).
* Nova's metadata ``hostname`` is the display name made a host name the
  way Nova's ``utils.sanitize_hostname`` does it: characters outside
  Latin-1 dropped, at most 63 characters, spaces, underscores and dots
  turned into ``-``, anything but letters, digits, ``_``, ``.`` and ``-``
  dropped, lower-cased, leading and trailing ``.`` and ``-`` stripped, and
  a default name when nothing is left. The domain Nova appends
  (``[api] dhcp_domain``) is not part of the host name.
* cloud-init sets that as the guest's host name (``set_hostname``), so
  both Workers of the sample boot as ``workernode``.

Logins (``first_boot``), as on a real cloud: a guest boots one of two
images, and cloud-init's first boot adds what Nova gives it.

* ``STOCK``, a cloud image (Ubuntu's): no password, no authorized key,
  SSH password logins off. cloud-init makes its default user (Ubuntu's
  ``ubuntu``, passwordless sudo) and puts the public key of the server's
  Nova keypair (``key_name``) in that user's ``authorized_keys``: a guest
  booted without a keypair and without user data that sets a password
  has no login.
* ``PREPARED``, the seeds' prepared image: the user ``ubuntu`` with the
  password ``ubuntu``, SSH password logins on, passwordless sudo, and no
  authorized key either: a key login needs the keypair too.

The user data runs when Heat passes it as it is (``user_data_format``
``RAW`` or ``SOFTWARE_CONFIG``; with Heat's default, ``HEAT_CFNTOOLS``,
it is cfn-init's, not cloud-init's). It must be ``#cloud-config`` using
only what the lab emulates (``EMULATED``; anything else fails the
server, rather than being silently ignored): ``system_info.default_user``
(``name``, ``sudo``, ``shell``, ``lock_passwd``) over the image's default
user, ``users`` (``[default]``, or ``[]``: no default user, so the
keypair's key goes nowhere), ``password`` (the default user's), with
``chpasswd: {expire: false}`` (else the password has expired, as
cloud-init leaves it) and ``ssh_pwauth``. ``lock_passwd`` has no effect
here: a user the image has keeps its password, a user cloud-init makes
has none.
"""

import collections
import re
import shlex

import yaml

from testbed import polling

STOCK = 'stock'
PREPARED = 'prepared'
EMULATED = ('system_info', 'users', 'ssh_pwauth', 'password', 'chpasswd')
# Ubuntu's cloud.cfg: the default user both images' cloud-init makes.
DEFAULT_USER = {'name': 'ubuntu', 'sudo': 'ALL=(ALL) NOPASSWD:ALL',
                'shell': '/bin/bash', 'lock_passwd': True}
USER_NAME = re.compile(r'[a-z_][a-z0-9_-]{0,31}')
SHELL = re.compile(r'/[A-Za-z0-9_/.-]+')
# The testbed's image (testbed.host_scripts) allows SSH password logins;
# these are the images' and cloud-init's settings, read before it.
IMAGE_SSHD_CONFIG = '/etc/ssh/sshd_config.d/30-cloudimg-settings.conf'
CLOUD_INIT_SSHD_CONFIG = '/etc/ssh/sshd_config.d/20-cloud-init.conf'

# Runs as root on the booted host; $1 image, $2 default user ('' for
# none), $3 its sudo rule, $4 its shell, $5 ssh_pwauth (yes, no or ''),
# $6 whether a password expires; stdin: the keypair's public key line
# and the password line (either may be empty).
FIRST_BOOT_SCRIPT = r'''set -e
image=$1 user=$2 rule=$3 shell=$4 pwauth=$5 expire=$6
IFS= read -r key || true
IFS= read -r password || true
rm -f /home/ubuntu/.ssh/authorized_keys
if [ "$image" = stock ]; then
    usermod -p '!' ubuntu
    rm -f /etc/sudoers.d/90-ubuntu
    echo 'PasswordAuthentication no' > %(image_sshd)s
fi
if [ -n "$user" ]; then
    id -u "$user" > /dev/null 2>&1 || useradd -m -p '!' "$user"
    usermod -s "$shell" "$user"
    if [ -n "$rule" ]; then
        printf '%%s %%s\n' "$user" "$rule" > /etc/sudoers.d/90-cloud-init-users
        chmod 440 /etc/sudoers.d/90-cloud-init-users
    fi
    home=$(getent passwd "$user" | cut -d: -f6)
    if [ -n "$key" ]; then
        install -d -m 700 -o "$user" -g "$user" "$home/.ssh"
        printf '%%s\n' "$key" > "$home/.ssh/authorized_keys"
        chown "$user:$user" "$home/.ssh/authorized_keys"
        chmod 600 "$home/.ssh/authorized_keys"
    fi
    if [ -n "$password" ]; then
        printf '%%s:%%s\n' "$user" "$password" | chpasswd -c SHA512
        [ "$expire" = false ] || passwd -e "$user" > /dev/null
    fi
fi
if [ -n "$pwauth" ]; then
    echo "PasswordAuthentication $pwauth" > %(cloud_init_sshd)s
fi
''' % {'image_sshd': IMAGE_SSHD_CONFIG,
       'cloud_init_sshd': CLOUD_INIT_SSHD_CONFIG}


FirstBoot = collections.namedtuple('FirstBoot',
                                   'argv stdin restart_sshd')


class UserDataError(Exception):
    """User data the guest's cloud-init cannot run, or the lab does not
    emulate."""


# A Nova console log of an Ubuntu VM, as cloud-init's keys_to_console leaves
# it: boot noise, the fingerprints block through logger (syslog header and
# its "ec2" tag), then the public keys; serial lines end in CRLF.
CONSOLE_LOG = """\
[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045)
[    2.315424] EXT4-fs (vda1): mounted filesystem with ordered data mode.
[  OK  ] Started OpenBSD Secure Shell server.
[   11.204915] cloud-init[812]: Cloud-init v. 23.3.3-0ubuntu0~22.04.1 \
running 'modules:final' at Mon, 08 Jan 2024 10:11:10 +0000. Up 11.05 seconds.
ci-info: no authorized SSH keys fingerprints found for user ubuntu.
<14>Jan  8 10:11:12 ec2:
<14>Jan  8 10:11:12 ec2: {rule}
<14>Jan  8 10:11:12 ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----
<14>Jan  8 10:11:12 ec2: {fingerprint}
<14>Jan  8 10:11:12 ec2: -----END SSH HOST KEY FINGERPRINTS-----
<14>Jan  8 10:11:12 ec2: {rule}
-----BEGIN SSH HOST KEY KEYS-----
{public_key}
-----END SSH HOST KEY KEYS-----
[   12.001234] cloud-init[905]: Cloud-init v. 23.3.3-0ubuntu0~22.04.1 \
finished at Mon, 08 Jan 2024 10:11:12 +0000. Up 12.00 seconds

Ubuntu 22.04.3 LTS {name} ttyS0

{name} login: """
KEYS_BEGIN = '-----BEGIN SSH HOST KEY KEYS-----'


def console_so_far(log, sshd_started):
    """The part of a CONSOLE_LOG that a VM still booting has printed: its
    kernel's first lines, up to the lines before keys_to_console's once
    its sshd has started (the host keys come last)."""
    marker = '<14>' if sshd_started else '[  OK  ] Started OpenBSD'
    return log[:log.index(marker)]


def server_name(props, stack_name, resource_name, short_id):
    """The Nova display name Heat gives an OS::Nova::Server."""
    return props.get('name') or '%s-%s-%s' % (stack_name, resource_name,
                                              short_id)


def guest_host_name(display_name, default='server'):
    """The host name cloud-init sets from Nova's metadata for a server
    with this display name (see the module docstring)."""
    name = display_name.encode('latin-1', 'ignore').decode('latin-1')[:63]
    name = re.sub(r'[ _.]', '-', name)
    name = re.sub(r'[^\w.-]+', '', name).lower().strip('.-')
    return name or default


def cloud_config(user_data, user_data_format='HEAT_CFNTOOLS'):
    """The cloud-config the guest's cloud-init runs ({} for none)."""
    if not user_data or user_data_format not in ('RAW', 'SOFTWARE_CONFIG'):
        return {}
    if not isinstance(user_data, str) or not user_data.startswith(
            '#cloud-config'):
        raise UserDataError('the lab runs only #cloud-config user data')
    try:
        config = yaml.safe_load(user_data) or {}
    except yaml.YAMLError as error:
        raise UserDataError('user data is not YAML: %s' % error)
    if not isinstance(config, dict):
        raise UserDataError('user data is not a cloud-config mapping')
    unknown = sorted(set(config) - set(EMULATED))
    if unknown:
        raise UserDataError('the lab does not emulate the cloud-config '
                            'keys %s' % ', '.join(map(str, unknown)))
    return config


def default_user(config):
    """The default user cloud-init makes with ``config``, or None."""
    users = config.get('users', ['default'])
    if users not in (['default'], []):
        raise UserDataError('users: the lab emulates only [default] or []')
    system_info = config.get('system_info') or {}
    if set(system_info) - {'default_user'}:
        raise UserDataError('system_info: the lab emulates only '
                            'default_user')
    given = system_info.get('default_user') or {}
    if not isinstance(given, dict) or set(given) - set(DEFAULT_USER):
        raise UserDataError('system_info.default_user: the lab emulates '
                            'only %s' % ', '.join(sorted(DEFAULT_USER)))
    user = dict(DEFAULT_USER, **given)
    if not USER_NAME.fullmatch(str(user['name'])) or not SHELL.fullmatch(
            str(user['shell'])) or '\n' in str(user['sudo'] or ''):
        raise UserDataError('system_info.default_user: a bad name, shell '
                            'or sudo rule')
    return user if users else None


def plan_first_boot(image, public_key=None, user_data=None,
                    user_data_format='HEAT_CFNTOOLS'):
    """What cloud-init's first boot does on a guest of ``image`` (STOCK or
    PREPARED) given the keypair's ``public_key`` and the server's user
    data (see the module docstring), for ``first_boot``; UserDataError
    for user data the lab cannot run, before anything boots."""
    config = cloud_config(user_data, user_data_format)
    user = default_user(config) or {}
    pwauth = config.get('ssh_pwauth')
    if pwauth is not None and not isinstance(pwauth, bool):
        raise UserDataError('ssh_pwauth must be true or false')
    password = config.get('password')
    if password is not None and (not isinstance(password, str) or
                                 '\n' in password):
        raise UserDataError('password must be one line')
    chpasswd = config.get('chpasswd') or {}
    if not isinstance(chpasswd, dict) or set(chpasswd) - {'expire'}:
        raise UserDataError('chpasswd: the lab emulates only expire')
    pwauth = {None: '', True: 'yes', False: 'no'}[pwauth]
    return FirstBoot(
        argv=(image, user.get('name', ''), user.get('sudo') or '',
              user.get('shell', ''), pwauth,
              'false' if chpasswd.get('expire') is False else 'true'),
        stdin='%s\n%s\n' % ((public_key or '').strip(), password or ''),
        restart_sshd=(pwauth or ('no' if image == STOCK else 'yes')) != 'yes')


def first_boot(host, plan):
    """Carry out a ``plan_first_boot`` plan on a just booted test host."""
    listening = host.sshd_log().count('Server listening on')
    command = ' '.join(map(shlex.quote, ('sh', '-c', FIRST_BOOT_SCRIPT,
                                         'first-boot') + plan.argv))
    host.run(command, input=plan.stdin)
    # A guest still booting (hosts' hold_sshd) reads the settings when its
    # sshd starts.
    if plan.restart_sshd and listening:
        _reload_sshd(host, listening)


def _reload_sshd(host, listening):
    """Have the host's sshd (its PID 1) read its settings again, as
    cloud-init restarts it, and wait until it listens again."""
    host.run('kill -HUP 1')
    polling.wait_until(
        lambda: host.sshd_log().count('Server listening on') > listening,
        'sshd on %s to restart' % host.name)
