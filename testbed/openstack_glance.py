"""Glance of the fake OpenStack: an image service with no images.

Tacker's v2 local NFVO lists a VNF instance's images (``GET
/v2/images?tag=<instance id>``, through openstacksdk, which first reads
the version document of the catalog's endpoint) when it grants any
operation but instantiate, and again after a terminate, to delete the
images it created from package files. The sample packages carry no image
file, so the list is always empty; an image service must still answer, or
every v2 scale and heal is refused (not granted).

Mixed into openstack_api.FakeOpenStack.
"""

GLANCE_PREFIX = '/image'


class GlanceMixin(object):
    """The Glance API of a FakeOpenStack."""

    @property
    def image_url(self):
        return self.base_url + GLANCE_PREFIX

    def _glance_versions(self):
        return 200, {}, {'versions': [{
            'id': 'v2.16', 'status': 'CURRENT',
            'links': [{'rel': 'self', 'href': self.image_url + '/v2/'}]}]}

    def is_glance_versions(self, path):
        """The version document's paths (read without a token)."""
        return path.rstrip('/') in (GLANCE_PREFIX, GLANCE_PREFIX + '/v2')

    def _glance_get(self, path, query):
        """GET below /image: the image list (always empty)."""
        if path.rstrip('/') == '/v2/images':
            return 200, {}, {'images': [], 'first': '/v2/images',
                             'schema': '/v2/schemas/images'}
        return 404, {}, {'code': 404, 'title': 'Not Found',
                         'message': 'Unknown Glance path or image.'}
