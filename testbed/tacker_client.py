"""A small client of Tacker's REST API as a user calls it: plain HTTP with
the headers Tacker's ``noauth`` pipelines read the caller from."""

import json
import types
import urllib.error
import urllib.request

from testbed import polling

# Tacker's v1 APIs with auth_strategy = noauth read the caller from these.
PROJECT_ID = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
USER_ID = 'operator'
HEADERS = {'X-User-Id': USER_ID, 'X-Project-Id': PROJECT_ID,
           'X-Roles': 'admin,member,reader'}


class TackerError(RuntimeError):
    def __init__(self, method, url, status, body):
        super().__init__('%s %s -> %s: %s'
                         % (method, url, status, body[:2000]))
        self.status = status
        self.body = body


class TackerClient(object):
    """Tacker's REST API as a user calls it (plain HTTP, noauth headers)."""

    def __init__(self, base_url, headers=None, timeout=60):
        self.base_url = base_url.rstrip('/')
        self.headers = dict(headers or HEADERS)
        self.timeout = timeout

    def request(self, method, path, body=None, data=None, content_type=None,
                expect=None):
        url = self.base_url + path
        headers = dict(self.headers)
        if body is not None:
            data = json.dumps(body).encode()
            content_type = 'application/json'
        if content_type:
            headers['Content-Type'] = content_type
        headers.setdefault('Accept', 'application/json')
        request = urllib.request.Request(url, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request,
                                        timeout=self.timeout) as response:
                status, raw = response.status, response.read()
                headers = dict(response.headers)
        except urllib.error.HTTPError as error:
            status, raw, headers = error.code, error.read(), dict(
                error.headers)
        text = raw.decode('utf-8', 'replace')
        if expect is not None and status not in (
                expect if isinstance(expect, (tuple, list)) else (expect,)):
            raise TackerError(method, url, status, text)
        try:
            payload = json.loads(text) if text.strip() else None
        except ValueError:
            payload = text
        return types.SimpleNamespace(status=status, body=payload,
                                     headers=headers)

    def get(self, path, expect=200):
        return self.request('GET', path, expect=expect).body

    def post(self, path, body=None, expect=(200, 201, 202)):
        return self.request('POST', path, body=body if body is not None
                            else {}, expect=expect)

    def delete(self, path, expect=(200, 202, 204)):
        return self.request('DELETE', path, expect=expect)

    # -- package and LCM helpers ---------------------------------------------

    def onboard_package(self, zip_path, timeout=300):
        """Create a VNF package, upload the zip; returns the package once
        ONBOARDED."""
        package = self.post('/vnfpkgm/v1/vnf_packages', {}).body
        with open(zip_path, 'rb') as handle:
            self.request('PUT', '/vnfpkgm/v1/vnf_packages/%s/package_content'
                         % package['id'], data=handle.read(),
                         content_type='application/zip', expect=202)
        path = '/vnfpkgm/v1/vnf_packages/%s' % package['id']
        seen = set()

        def onboarded():
            current = self.get(path)
            state = current['onboardingState']
            if state == 'ONBOARDED':
                return current
            if state == 'CREATED' and seen - {'CREATED'}:
                # A conductor's revert_upload_vnf_package put it back:
                # the upload failed and will not be retried.
                raise TackerError('GET', path, 200, json.dumps(current))
            seen.add(state)
            return None
        return polling.wait_until(onboarded, 'package %s to be ONBOARDED'
                                  % package['id'], timeout, first_delay=0.2,
                                  max_delay=2)

    def op_occ_id(self, response):
        location = response.headers.get('Location', '')
        return location.rstrip('/').rsplit('/', 1)[-1]

    def wait_op(self, op_id, timeout=1800,
                final=('COMPLETED', 'FAILED_TEMP', 'FAILED', 'ROLLED_BACK')):
        """Poll an LCM operation occurrence until it reaches a final state;
        returns its body."""
        path = '/vnflcm/v1/vnf_lcm_op_occs/%s' % op_id

        def done():
            occ = self.get(path)
            return occ if occ['operationState'] in final else None
        return polling.wait_until(done, 'LCM operation %s' % op_id,
                                  timeout, first_delay=0.5, max_delay=3)
