"""Fixtures python-nomad's upstream tests ask for; Paddock's version of upstream's CI file.

The token is read from `tests.common` when each fixture is made, so a token that
test_acl.py's bootstrap test stores there is used by every test after it.
"""

import nomad
import pytest

import tests.common as common


def _client(**extra):
    return nomad.Nomad(
        host=common.IP,
        port=common.NOMAD_PORT,
        verify=False,
        token=common.NOMAD_TOKEN,
        **extra,
    )


@pytest.fixture
def nomad_setup():
    return _client()


@pytest.fixture
def nomad_setup_with_namespace():
    return _client(namespace=common.NOMAD_NAMESPACE)
