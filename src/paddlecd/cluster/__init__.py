"""The cluster room: N ranks of an image run as one distributed Paddle job (Kubernetes or local).

Modules: :mod:`.jobfile` (train.yaml → JobSpec), :mod:`.quantity` (Kubernetes quantities),
:mod:`.render` (pure: spec + image → manifests), :mod:`.k8s` (the only importer of
``kubernetes``), :mod:`.watch` (submit + watch on Kubernetes), :mod:`.local` (N containers on a
Docker network). The deploy stage that plans a release's job is :mod:`paddlecd.deployment`; verify
runs its collective checks through this room alone.
"""

from paddlecd.cluster.jobfile import JobSpec, load
from paddlecd.cluster.render import Target, launch_argv

__all__ = ["JobSpec", "Target", "launch_argv", "load"]
