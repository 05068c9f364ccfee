"""The documentation site: `mkdocs build --strict` passes (a broken link or anchor fails it), the
CLI reference holds every task's own help, and the README stays a short page whose links land."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from support import ROOT

pytestmark = pytest.mark.xdist_group("docs")  # one worker builds the site, once

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def test_cli_reference_has_every_task_with_its_help(site):
    from paddlecd.cli import reference

    html = (site / "reference/cli/index.html").read_text()
    names = [f"{space}.{task}" for space, sub in reference.namespaced().collections.items()
             for task in sub.task_names]
    assert len(names) > 20
    for name in names:
        assert f'id="{name.replace(".", "").lower()}"' in html, name
        assert f"Usage: invoke [--core-opts] {name} " in html, name
    # a flag's help text, not only its name (Invoke hands each help string out once)
    assert "resolve and show the digests without writing images/lock.yaml" in html


def test_readme_is_short_and_its_links_land(site):
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert len(links) >= 10
    for path, anchor in links:
        assert (ROOT / path).is_file(), path
        if anchor:
            page = site / path.removeprefix("docs/").removesuffix(".md") / "index.html"
            assert f'id="{anchor}"' in page.read_text(), f"{path}#{anchor}"
