"""What an operator needs from an error of Tacker's VIM code (the
registration, update or deletion of a Kubernetes VIM): Tacker's own
exceptions and the kubernetes client's, reduced to their cause and fix,
with the hook's secrets hidden."""

import json
import re

from kubernetes_mgmt_pv import exceptions
from kubernetes_mgmt_pv import redaction


def reason(error, *secrets):
    """What an operator needs from an error of Tacker's VIM code."""
    from tacker.extensions import nfvo
    text = _condensed(str(error).strip()) or type(error).__name__
    if isinstance(error, nfvo.VimUnauthorizedException):
        # Tacker's check of the cluster (GET /api/ with the token and the
        # CA certificate) failed: a rejected token, or no connection.
        text = ('Tacker\'s check of the cluster (GET /api/ with the token '
                'and CA certificate) failed: %s' % text)
    elif isinstance(error, nfvo.VimEncryptKeyError):
        text += (' (Tacker keeps Kubernetes VIM credentials only with '
                 'Barbican: set [k8s_vim] use_barbican = True in tacker.conf '
                 'and make Barbican reachable)')
    elif _is_kubernetes_api_error(error):
        # Let through by Tacker from its list of the namespaces (the VIM's
        # regions), e.g. 403 for a token without that right.
        text = ('the Kubernetes API server answered %s (Tacker lists the '
                'namespaces with the token)' % text)
    elif not isinstance(error, exceptions.MgmtDriverError):
        text = '%s: %s' % (type(error).__name__, text)
    return redaction.redact(text, secrets)


def _is_kubernetes_api_error(error):
    try:
        from kubernetes.client import exceptions as kubernetes_exceptions
    except ImportError:
        return False
    return isinstance(error, kubernetes_exceptions.ApiException)


def _condensed(text):
    """The kubernetes client's "(401)\\nReason: ...\\nHTTP response headers:
    ...\\nHTTP response body: {...}" reduced to status, reason and message."""
    match = re.match(r'\((\d+)\)\s*Reason:\s*([^\n]*)', text)
    if not match:
        return text
    summary = '%s %s' % (match.group(1), match.group(2).strip())
    body = re.search(r'HTTP response body:\s*(.*)', text, re.DOTALL)
    if body:
        try:
            message = json.loads(body.group(1)).get('message')
        except (ValueError, AttributeError):
            message = None
        if message and message != match.group(2).strip():
            summary += ': %s' % message
    return summary
