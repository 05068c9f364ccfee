"""The deploy stage: a promoted release (or an image digest) run as a distributed training job.

Modules: :mod:`.stage` (resolve the release, plan the job, then run it on Kubernetes or as local
containers through :mod:`paddlecd.cluster`). It sits below the release room in the flow, so it
reads releases directly; the cluster room it drives stays importable without it (verify runs its
ranks through :mod:`paddlecd.cluster` alone).
"""

from paddlecd.deployment.stage import (
    CLUSTERS,
    Deployed,
    Plan,
    check_job,
    deployed,
    plan,
    render_to,
    resolve,
    run,
)

__all__ = ["CLUSTERS", "Deployed", "Plan", "check_job", "deployed", "plan", "render_to", "resolve",
           "run"]
