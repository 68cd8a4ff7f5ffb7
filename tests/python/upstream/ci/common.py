"""Settings python-nomad's upstream tests import as `tests.common`.

Upstream's CI provides this module next to its tests; this is Paddock's version of it.
`run.py` copies it into the unpacked suite and sets the variables below to point at the
agent it started.
"""

import os

# Where the agent listens. python-nomad's tests build `http://{IP}:{NOMAD_PORT}` URLs
# themselves (the `responses` mocks), so these must be what the client is given.
IP = os.environ.get("NOMAD_IP", "127.0.0.1")
NOMAD_PORT = os.environ.get("NOMAD_PORT", 4646)

# ACL token. test_acl.py's bootstrap test replaces it with the bootstrap token's secret.
NOMAD_TOKEN = os.environ.get("NOMAD_TOKEN", None)

# The namespace the namespace-aware fixtures and mocked responses use.
NOMAD_NAMESPACE = "admin"
