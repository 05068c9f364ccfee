"""Shared test helpers: the checkout's root, settings for the real project files, running ``invoke``
as a user does, the scripted Kubernetes API, OCI images pushed by our own client, and the clean-up
of what integration tests leave in the Docker engine.

``tests/`` is on ``sys.path`` (pytest puts the folder of the root conftest.py there), so tests
import ``from support import ROOT, invoke``; fixtures built on these live in the conftest files.
"""

from support import base
from support.cli import INVOKE, clean_env, cli_env, invoke
from support.project import ROOT, UNIQUE, WORKER, project_settings

__all__ = ["INVOKE", "ROOT", "UNIQUE", "WORKER", "clean_env", "cli_env", "invoke", "base",
           "project_settings"]
