"""Training-job tasks: deploy, render (``invoke cluster.*``; ``deploy`` is also a short verb).

The plan goes to stderr; stdout gets the results: ``model: <location>``, the manifests of
``deploy --dry-run`` (so ``invoke deploy … --dry-run > job.yaml`` works), the files ``render``
wrote; with ``deploy --json``, one JSON document.
"""

from __future__ import annotations

from paddlecd.cli import view
from paddlecd.cli.common import (
    VERBOSE_HELP,
    count,
    guarded,
    json_result,
    result,
    say,
    settings,
    task,
)
from paddlecd.errors import ConfigError

DEPLOY_HELP = {
    "release": "release to run, X.Y.Z-<variant> (e.g. 1.4.0-cu126); resolved once to its digest",
    "image": "instead of --release: an image by digest, host/repo@sha256:<64 hex> "
             "(tags are refused)",
    "variant": "with --image: the image's variant (default cpu); decides whether GPUs are allowed",
    "job": "the job file (schema: src/paddlecd/schemas/train.schema.json; "
           "example: examples/train.yaml)",
    "nodes": "number of nodes (pods or containers); default: 'nodes' in the job file",
    "gpus_per_node": "GPUs per node, one training process each; "
                     "default: resources.gpus in the job file",
    "cluster": "local (N containers on one Docker network) or k8s (kubeconfig); "
               "default: settings cluster.kind",
    "kind": "job (Indexed batch/v1 Job + headless Service) "
            "or paddlejob (Kubeflow PaddleJob, k8s only)",
}


def _plan(s, job, release, image, variant, nodes, gpus_per_node, cluster_kind, kind):
    from paddlecd import deployment

    return deployment.plan(s, job=job, release=release, image=image, variant=variant,
                     nodes=count("nodes", nodes),
                     gpus_per_node=count("gpus-per-node", gpus_per_node),
                     kind=kind, cluster=cluster_kind)


@task(positional=[],
      help={**DEPLOY_HELP, "dry_run": "print the plan and the manifests, create nothing",
            "json": "print the job id, image digest and model location as one JSON document "
                    "on stdout (with --dry-run: also the manifests)",
            "policy": "with --dry-run: also print the Kyverno ClusterPolicy that admits only "
                      "verified releases (invoke release.policy), after the manifests",
            "verbose": VERBOSE_HELP})
@guarded
def deploy(c, job=None, release=None, image=None, variant=None, nodes=None, gpus_per_node=None,
           cluster=None, kind="job", dry_run=False, json=False, policy=False, verbose=False):
    """Run a promoted image as a distributed Paddle training job, locally or on Kubernetes.

    Every node runs `python -m paddle.distributed.launch --master <job>-0.<job>:<port> --nnodes N
    --rank <i>` on the image by digest, with the environment the Kubeflow PaddleJob controller
    sets (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID). The plan is printed first; --dry-run also
    prints the manifests and stops. --cluster local runs N containers on a fresh Docker network
    (gloo on CPU), streams every rank's log and removes everything afterwards (PADDLECD_KEEP=1
    keeps it). --cluster k8s creates a headless Service + Indexed Job (or a PaddleJob with --kind
    paddlejob), watches the pods (image pull errors, unschedulable pods, completion, backoff
    limit) and streams rank 0's log. Prints the exported model location on success (hand it to
    `invoke upload`); --json prints job_id, digest, model and the output volume instead
    (paddlecd.deployment.Deployed).
    Examples:
      invoke deploy --release 1.4.0-cpu --job examples/train.yaml --nodes 2
      invoke deploy --release 1.4.0-cu126 --job train.yaml --nodes 2 --gpus-per-node 8 \\
        --cluster k8s --dry-run
    """
    from paddlecd import deployment

    s = settings()
    if policy and not dry_run:
        raise ConfigError("--policy is for --dry-run", "apply the policy itself with kubectl: "
                          "invoke release.policy --out policy.yaml")
    plan = _plan(s, job, release, image, variant, nodes, gpus_per_node, cluster, kind)
    extra = [admission_policy(s)] if policy else []
    if dry_run:
        for line in plan.describe():
            say(line)
    if dry_run and json:
        say("dry run: nothing created")
        return json_result({**deployment.deployed(plan, executed=False).to_json(),
                            "manifests": [*plan.manifests, *extra]})
    if dry_run:
        import yaml

        result(yaml.safe_dump_all([*plan.manifests, *extra], sort_keys=False))
        return say("dry run: nothing created")
    with view.stage("deploy", plan.target.variant, state=s.state, verbose=verbose) as st:
        for line in plan.describe():  # the plan, then the job's events and every rank's log
            st.line(line)
        location = deployment.run(s, plan, on_event=lambda m: st.line(f"-- {m}"), on_line=st.line)
        st.done(f"job {plan.job_id} succeeded")
    if json:
        json_result(deployment.deployed(plan, executed=True))
        return location
    result(f"model: {location}")
    return location


def admission_policy(s):
    from paddlecd.release import admission

    return admission.kyverno_policy(s)


@task(positional=[], help={
    **DEPLOY_HELP, "out": "folder to write the manifests to (created; one YAML file per object)"})
@guarded
def render(c, job=None, out=None, release=None, image=None, variant=None, nodes=None,
           gpus_per_node=None, cluster="k8s", kind="job"):
    """Write the Kubernetes manifests of a training job to a folder, create nothing.

    The same checks as deploy run first (job file schema, release → digest, GPUs vs variant, shm vs
    memory). Files are NN-<kind>-<name>.yaml in creation order, ready for kubectl apply -f <out>.
    Example:
      invoke cluster.render --release 1.4.0-cu126 --job train.yaml --nodes 2 --gpus-per-node 8 \\
        --out manifests/
    """
    from paddlecd import deployment

    if not out:
        raise ConfigError("no output folder given", "pass --out manifests/")
    if cluster != "k8s":  # a trial: --cluster local wrote Kubernetes manifests without a word
        raise ConfigError(f"--cluster {cluster[:40]}: cluster.render writes Kubernetes manifests "
                          "only", "drop --cluster; for a local run: invoke deploy --cluster local")
    plan = _plan(settings(), job, release, image, variant, nodes, gpus_per_node, cluster, kind)
    for path in deployment.render_to(plan, out):
        result(f"wrote {path}")
