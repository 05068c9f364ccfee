"""The command-line layer: Invoke tasks that parse flags, call one package function and turn
paddlecd errors into exit codes (STYLE.md §3). ``tasks.py`` at the project root exposes :data:`ns`.

One module per namespace: :mod:`.image`, :mod:`.smoke`, :mod:`.release`, :mod:`.evidence`,
:mod:`.artifacts`, :mod:`.cluster`, :mod:`.pipeline`, plus :mod:`.doctor` (top level only).
:mod:`.common` holds the one catch site and the output streams (results on stdout, progress and
plans on stderr); :mod:`.view` what a person sees of a running stage (live view, plain CI lines,
log files); :mod:`.reference` the docs' CLI reference; :mod:`.argv` the two command-line
workarounds. ``invoke --list`` shows each task
once under its namespace, plus the short verbs in :data:`SHORT_VERBS` at the top level.
"""

from __future__ import annotations

from invoke import Collection

from paddlecd.cli import artifacts, cluster, common, doctor, evidence, pipeline, release, smoke
from paddlecd.cli import image as image_tasks

NAMESPACES = (image_tasks, smoke, release, evidence, artifacts, cluster, pipeline)
# The verbs of the main flow, also at the top level: `invoke build push verify`, `invoke promote` …
SHORT_VERBS = (image_tasks.lock, image_tasks.build, image_tasks.push, image_tasks.verify,
               release.promote, cluster.deploy, artifacts.upload, doctor.doctor)


def namespace() -> Collection:
    """The root collection: one sub-collection per namespace module, then the short verbs."""
    ns = Collection()
    for module in NAMESPACES:
        ns.add_collection(Collection.from_module(module))
    for verb in SHORT_VERBS:
        ns.add_task(verb)
    return ns


ns = namespace()
common.COLLECTION[:] = [ns]  # the line's -v is read with it (argv.shared_variant)

__all__ = ["SHORT_VERBS", "namespace", "ns"]
