"""The test registry itself: TLS with our CA, htpasswd auth enforced (real distribution)."""

import requests


def test_registry_requires_auth_over_tls(registry):
    url = f"https://{registry.host}/v2/"
    assert requests.get(url, verify=str(registry.ca_file), timeout=5).status_code == 401
    ok = requests.get(url, verify=str(registry.ca_file), auth=("ci", "s3cret-Pa55"), timeout=5)
    assert ok.status_code == 200
    bad = requests.get(url, verify=str(registry.ca_file), auth=("ci", "wrong"), timeout=5)
    assert bad.status_code == 401
