"""Training jobs: a promoted image run as a distributed Paddle job, on Kubernetes or locally.

Modules: :mod:`.jobfile` (train.yaml → JobSpec), :mod:`.render` (pure: spec + image → manifests),
:mod:`.k8s` (the only importer of ``kubernetes``), :mod:`.watch` (submit + watch on Kubernetes),
:mod:`.local` (N containers on a Docker network), :mod:`.deploy` (plan, then run).
"""

from paddlecd.cluster.deploy import Deployed, Plan, deployed, plan, render_to, resolve, run
from paddlecd.cluster.jobfile import JobSpec, load
from paddlecd.cluster.render import Target, launch_argv

__all__ = ["Deployed", "JobSpec", "Plan", "Target", "deployed", "launch_argv", "load", "plan",
           "render_to", "resolve", "run"]
