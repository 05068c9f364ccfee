"""The test registry itself: TLS with our CA, htpasswd auth enforced (real distribution)."""

import pytest
import requests


def test_registry_requires_auth_over_tls(registry):
    url = f"https://{registry.host}/v2/"
    assert requests.get(url, verify=str(registry.ca_file), timeout=5).status_code == 401
    ok = requests.get(url, verify=str(registry.ca_file), auth=("ci", "s3cret-Pa55"), timeout=5)
    assert ok.status_code == 200
    bad = requests.get(url, verify=str(registry.ca_file), auth=("ci", "wrong"), timeout=5)
    assert bad.status_code == 401


def test_the_embedded_registry_stops_on_sigterm_with_its_server(tmp_path):
    """`scripts/stack.sh down` sends SIGTERM. The supervisor stopped its registry from inside the
    signal handler, deadlocked on the child's wait, and stayed alive over a zombie registry: the
    next demo found nothing answering on the port and a stale process."""
    import signal
    import subprocess
    import sys
    import time

    from paddlecd.registry.embedded import free_port

    port = free_port()
    sup = subprocess.Popen([sys.executable, "-m", "paddlecd.registry.embedded", "--port", str(port),
                            "--root", str(tmp_path)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline, ready = time.monotonic() + 30, False
        while not ready and time.monotonic() < deadline:
            try:
                ready = requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200
            except requests.RequestException:
                time.sleep(0.2)
        assert ready, "the embedded registry did not answer within 30 s"
        time.sleep(0.5)  # into the supervisor's wait for its registry
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=15) == 0
        with pytest.raises(requests.RequestException):
            requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1)
    finally:
        sup.kill()
