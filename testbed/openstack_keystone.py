"""Keystone v3 of the fake OpenStack: password authentication at
``POST /v3/auth/tokens`` with a service catalog (identity, orchestration,
compute), the version document and the region list. The cloud's user is
admin of its project; ``add_account`` adds users of other projects.

Mixed into openstack_api.FakeOpenStack.
"""

import datetime
import uuid

from testbed import openstack_model

INTERFACES = ('public', 'internal', 'admin')


class KeystoneMixin(object):
    """Tokens and the catalog of a FakeOpenStack."""

    def add_account(self, username, password, project_name,
                    roles=('member', 'reader')):
        """Another user with a role on a project of its own (e.g. a
        service user in project ``service``), in the user and project
        domains of the cloud's user; returns its ids."""
        account = {'user_id': uuid.uuid4().hex, 'username': username,
                   'password': password, 'project_id': uuid.uuid4().hex,
                   'project_name': project_name, 'roles': tuple(roles)}
        with self._lock:
            self._accounts.append(account)
        return account

    def _cloud_account(self):
        # Keystone lists the roles admin implies (member, reader).
        return {'user_id': self.user_id, 'username': self.username,
                'password': self.password, 'project_id': self.project_id,
                'project_name': self.project_name,
                'roles': ('admin', 'member', 'reader')}

    def _issue_token(self, body):
        """Check a v3 password auth body; return (status, headers, body)."""
        account = self._account_of(body)
        if account is None:
            return 401, {}, keystone_error(
                401, 'Unauthorized',
                'The request you have made requires authentication.')
        token = uuid.uuid4().hex
        with self._lock:
            self._tokens.add(token)
        return 201, {'X-Subject-Token': token}, {
            'token': self._token_body(account)}

    def _account_of(self, body):
        """The account whose password and project ``body`` names, or
        None."""
        try:
            identity = body['auth']['identity']
            user = identity['password']['user']
            project = body['auth']['scope']['project']
        except (KeyError, TypeError):
            return None
        if 'password' not in identity.get('methods', []):
            return None
        with self._lock:
            accounts = [self._cloud_account()] + list(self._accounts)
        for account in accounts:
            user_ok = (user.get('id') == account['user_id'] or (
                user.get('name') == account['username']
                and _domain_matches(user.get('domain'),
                                    self.user_domain_name)))
            project_ok = (project.get('id') == account['project_id'] or (
                project.get('name') == account['project_name']
                and _domain_matches(project.get('domain'),
                                    self.project_domain_name)))
            if user_ok and project_ok and \
                    user.get('password') == account['password']:
                return account
        return None

    def _token_body(self, account):
        now = openstack_model.now()
        return {
            'methods': ['password'],
            'issued_at': openstack_model.iso(now),
            'expires_at': openstack_model.iso(
                now + datetime.timedelta(hours=1)),
            'audit_ids': [uuid.uuid4().hex[:22]],
            'user': {'id': account['user_id'], 'name': account['username'],
                     'domain': _domain(self.user_domain_name)},
            'project': {'id': account['project_id'],
                        'name': account['project_name'],
                        'domain': _domain(self.project_domain_name)},
            'roles': [{'id': uuid.uuid4().hex, 'name': role}
                      for role in account['roles']],
            'catalog': [
                _catalog_entry('identity', 'keystone', self.auth_url,
                               self.regions),
                _catalog_entry('orchestration', 'heat', self.heat_url,
                               self.regions),
                _catalog_entry('compute', 'nova', self.compute_url,
                               self.regions),
                _catalog_entry('image', 'glance', self.image_url,
                               self.regions),
            ],
        }

    def _token_is_valid(self, token):
        with self._lock:
            return token in self._tokens

    def _version_document(self):
        return 200, {}, {'version': {
            'id': 'v3.14', 'status': 'stable',
            'updated': '2020-04-07T00:00:00Z',
            'links': [{'rel': 'self', 'href': self.auth_url + '/'}],
            'media-types': [{
                'base': 'application/json',
                'type': 'application/vnd.openstack.identity-v3+json'}]}}

    def _regions(self):
        return 200, {}, {'regions': [
            {'id': region, 'description': '', 'parent_region_id': None,
             'links': {'self': '%s/regions/%s' % (self.auth_url, region)}}
            for region in self.regions], 'links': {
                'self': self.auth_url + '/regions', 'previous': None,
                'next': None}}


def keystone_error(code, title, message):
    return code, {}, {'error': {'code': code, 'title': title,
                                'message': message}}


def _catalog_entry(service_type, name, url, regions):
    return {
        'id': uuid.uuid4().hex,
        'type': service_type,
        'name': name,
        'endpoints': [{'id': uuid.uuid4().hex, 'interface': interface,
                       'region': region, 'region_id': region, 'url': url}
                      for region in regions for interface in INTERFACES],
    }


def _domain(name):
    return {'id': _domain_id(name), 'name': name}


def _domain_id(name):
    """Keystone's built-in 'Default' domain has the id 'default'."""
    return 'default' if name == 'Default' else name


def _domain_matches(spec, name):
    spec = spec or {}
    return spec.get('name') == name or spec.get('id') == _domain_id(name)
