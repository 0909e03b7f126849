from oslo_config import cfg
import pytest

from kubernetes_mgmt_pv import config


def test_options_are_listed_for_the_config_generator():
    [(group, options)] = config.list_opts()
    assert group.name == 'kubernetes_mgmt_pv'
    names = {option.name for option in options}
    assert {'host_key_policy', 'known_hosts_file', 'ssh_connect_retries',
            'command_timeout', 'max_concurrent_nodes', 'supported_os',
            'pv_available_timeout', 'pv_delete_timeout'} <= names
    assert all(option.help for option in options)


def test_defaults_and_validation():
    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    conf([])
    options = config.options(conf)
    assert options.host_key_policy == 'console'
    assert options.console_key_fallback == 'reject'
    assert 'ubuntu:22.04' in options.supported_os
    # Overrides live in the shared option group: always clear them.
    try:
        conf.set_override('host_key_policy', 'reject', config.GROUP_NAME)
        assert config.options(conf).host_key_policy == 'reject'
        with pytest.raises(ValueError):
            conf.set_override('host_key_policy', 'trust-me',
                              config.GROUP_NAME)
    finally:
        conf.clear_override('host_key_policy', config.GROUP_NAME)
