"""Kubernetes, behind one module (STYLE.md §1): nothing else imports ``kubernetes``.

Submits rendered manifests with the official client, watches the pods to the end and streams rank
0's log. The kubeconfig comes from the usual places (``$KUBECONFIG``, ``~/.kube/config``, in-cluster
service account) with ``settings.cluster.context`` as the context. Every ``ApiException`` is
translated here, once, into a :class:`~paddlecd.errors.ClusterError`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from paddlecd import files
from paddlecd.config import FORMATS, Settings
from paddlecd.errors import ClusterError, network_reason
from paddlecd.files import read_regular
from paddlecd.types import KubeObject

PADDLEJOB = ("kubeflow.org", "v1", "paddlejobs")
# Mounted into every pod with a service account (kubernetes.io/docs/tasks/run-application/
# access-api-from-pod/#directly-accessing-the-rest-api): the pod's own namespace.
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass
class Api:
    """Typed API groups of one cluster connection; ``context`` names the kubeconfig context used."""

    core: Any
    batch: Any
    custom: Any
    context: str

    def close(self) -> None:
        """Release the connection pool."""
        self.core.api_client.close()


def _config_file() -> str:
    """``$KUBECONFIG`` (a ``:``-separated list) or ``~/.kube/config``, read now: the client library
    reads it once, at import time."""
    paths = os.environ.get("KUBECONFIG") or "~/.kube/config"
    return os.pathsep.join(os.path.expanduser(p) for p in paths.split(os.pathsep))


def namespace(settings: Settings, *, service_account_namespace: Path = SA_NAMESPACE) -> str:
    """The namespace jobs go to, as kubectl picks it: ``settings.cluster.namespace`` when
    set; else the ``namespace`` of the kubeconfig context (``settings.cluster.context`` or the
    current one); else, with no kubeconfig, the in-cluster service account's namespace file; else
    ``default``.

    Args:
        service_account_namespace: the file a pod's service account mounts (tests pass another).

    Raises:
        ClusterError: the kubeconfig is not YAML (naming the file and line), or YAML but not a
            mapping, or of the wrong shape (:func:`_shape_problem`: a ``*-data`` field that is
            no base64); its current-context (or ``cluster.context``) names no context of it, or a
            context names a missing cluster or user (kubectl: ``context "x" does not exist``);
            no current-context and no ``cluster.context`` (the deploy's :func:`connect` refuses
            that too); the context's namespace is no Kubernetes name (an RFC 1123 label).
    """
    if settings.cluster.namespace:
        return settings.cluster.namespace
    wrong = _shape_problem()
    if wrong:
        raise wrong
    current = _current_context()
    try:
        contexts, _ = kubernetes.config.list_kube_config_contexts(config_file=_config_file())
    except yaml.YAMLError as e:
        raise _not_yaml(e) from e
    except TypeError as e:  # YAML, but a list or a scalar: the client indexes it as a mapping
        raise _not_kubeconfig() from e
    except ConfigException as e:
        missing = _names_missing(e)
        wanted = settings.cluster.context or (current[1] if current else None)
        stale = re.search(r"Expected object with name (.*) in .*/contexts list", str(e))
        if missing and wanted and stale and stale.group(1) != wanted:
            # the client's (last file's) stale current-context is not the one used: kubectl
            # --context reads such a file (a trial: refused, its hint "set cluster.context",
            # which was set)
            contexts = _contexts()
        elif missing:  # a trial: current-context: ghost planned into namespace "default", exit 0
            raise missing from e
        elif _names_no_context(e) and wanted:  # the client needs one to list; kubectl --context
            contexts = _contexts()            # does not
        elif _names_no_context(e):  # a dry run planned into "default", the deploy then refused
            raise _names_no_context(e) from e
        else:
            return _no_kubeconfig(service_account_namespace)
    except FileNotFoundError:
        return _no_kubeconfig(service_account_namespace)
    except OSError as e:  # a folder, unreadable: not "no kubeconfig"
        raise _unreadable(e) from e
    wanted = settings.cluster.context or (current[1] if current else None)
    chosen = next((c for c in contexts if c["name"] == wanted), None) if wanted else None
    if wanted and chosen is None and settings.cluster.context:
        raise ClusterError(f"kubeconfig {_config_file()}: no context named {wanted[:80]!r} "
                           "(cluster.context)", "kubectl config get-contexts lists them")
    if wanted and chosen is None and current:  # as the client names it (_names_missing)
        raise ClusterError(f"kubeconfig {current[0]}: no context named {wanted[:80]!r} in it",
                           "kubectl config get-contexts lists them; kubectl config use-context "
                           "NAME, or set cluster.context")
    found = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    label, what = FORMATS["cluster.namespace"]  # the setting's own rule, RFC 1123
    if not isinstance(found, str) or not re.fullmatch(label, found):
        raise ClusterError(f"kubeconfig {_config_file()}: context {(chosen or {}).get('name')!r} "
                           f"has namespace {str(found)[:80]!r}: not {what}",
                           "fix it (kubectl config set-context --current --namespace=NAME), or "
                           "set cluster.namespace")
    return found


def _current_context() -> tuple[str, str] | None:
    """``(file, name)`` of the current-context kubectl uses: with a ``$KUBECONFIG`` list, the
    first file's that sets one (client-go clientcmd ``ClientConfigLoadingRules.Load``: "the first
    file to set a particular value wins"). The client library takes the last file's
    (kubernetes-client/python ``KubeConfigMerger.load_config``): a trial's deploy went to
    another cluster than ``kubectl config current-context`` named. None when no file sets one.
    Files that cannot be read are left to the client (it names them)."""
    for name in _config_file().split(os.pathsep):
        try:
            doc = yaml.safe_load(read_regular(Path(name), "kubeconfig", error=ClusterError))
        except (ClusterError, OSError, ValueError, yaml.YAMLError):
            continue
        value = doc.get("current-context") if isinstance(doc, dict) else None
        if value and isinstance(value, str):
            return name, value
    return None


def _contexts() -> list[dict[str, Any]]:
    """The ``contexts`` entries of the kubeconfig file (shape-checked by :func:`_shape_problem`),
    read without the client's current-context check."""
    out: list[dict[str, Any]] = []
    for name in filter(None, _config_file().split(os.pathsep)):  # merged in order
        try:
            doc = _load(Path(name))
        except ClusterError:  # named by _shape_problem where the files are checked
            continue
        found = doc.get("contexts") if isinstance(doc, dict) else None
        out += [c for c in found or [] if isinstance(c, dict)]
    return out


def _names_missing(e: ConfigException) -> ClusterError | None:
    """The client's "Expected object with name ghost in <file>/contexts list" (a context, cluster
    or user that the kubeconfig names but does not hold) as one line naming it, else None."""
    missing = re.search(r"Expected object with name (.*) in (.*)/(\w+) list", str(e))
    if not missing:
        return None
    return ClusterError(f"kubeconfig {missing.group(2)}: no {missing.group(3)[:-1]} named "
                        f"{missing.group(1)[:80]!r} in it",
                        "kubectl config get-contexts lists them; kubectl config use-context "
                        "NAME, or set cluster.context")


def _names_no_context(e: ConfigException) -> ClusterError | None:
    """The client's "Expected key current-context in <file>" (a kubeconfig with no current
    context, and none chosen) as one line naming the file, else None (a trial: "no usable
    kubeconfig", hint "set KUBECONFIG", for a KUBECONFIG that was set)."""
    missing = re.search(r"Expected key current-context in (.*)", str(e))
    if not missing:
        return None
    return ClusterError(f"kubeconfig {missing.group(1).strip()[:300]} has no current-context",
                        "pick one: kubectl config use-context NAME, or set cluster.context "
                        "(PADDLECD_CLUSTER_CONTEXT); kubectl config get-contexts lists them")


def _names_missing_file(e: ConfigException, context: str | None) -> ClusterError | None:
    """The client's "File does not exist: X" for a file the kubeconfig names (a cluster's
    ``certificate-authority``, a user's ``client-certificate``/``client-key``/``tokenFile``) as
    one line naming the kubeconfig and the entry, else None (a trial: "no usable kubeconfig",
    hint "set KUBECONFIG", for a KUBECONFIG that was set and right but for one path)."""
    missing = re.fullmatch(r"File does not exist: (.*)", str(e).strip())
    if not missing:
        return None
    named = missing.group(1)
    where = next((f"kubeconfig {path}: {inner} {str(entry.get('name'))[:80]!r} {field}"
                  for path, doc in _documents()
                  for key, inner in (("clusters", "cluster"), ("users", "user"))
                  for entry in doc.get(key) or [] if isinstance(entry, dict)
                  for field, value in (entry.get(inner) or {}).items() if value == named), "")
    where = where or f"kubeconfig {_config_file()} (context {context or '(current)'})"
    return ClusterError(f"{where} names {named[:200]}, which does not exist",
                        "fix that path in the kubeconfig, or embed the file as its *-data field "
                        "(kubectl config view --raw shows them)")


def _documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, document)`` of each kubeconfig file that reads as a YAML mapping (the others are
    named by :func:`_shape_problem` or the client)."""
    for path in filter(None, _config_file().split(os.pathsep)):
        with contextlib.suppress(ClusterError, OSError, ValueError, yaml.YAMLError):
            doc = files.load_yaml(read_regular(Path(path), "kubeconfig", error=ClusterError))
            if isinstance(doc, dict):
                yield path, doc


def _load(path: Path) -> Any:
    """The YAML document of the kubeconfig file ``path`` (None when nothing is there), read as
    kubectl reads it: UTF-8 text.

    Raises:
        ClusterError: not a regular file (never opened: a named pipe blocks), unreadable, not
            UTF-8 (trial 20: the client's UnicodeDecodeError was a traceback in deploy, its dry
            run and doctor), or not YAML; each names the file.
    """
    try:
        raw = read_regular(path, "kubeconfig", error=ClusterError)
    except FileNotFoundError:
        return None
    except ClusterError as e:
        raise ClusterError(e.cause, "point KUBECONFIG at the kubeconfig file, or unset it") from e
    except OSError as e:
        raise _unreadable(e) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ClusterError(f"kubeconfig {path} is not UTF-8 text (byte {e.start})",
                           "save it as UTF-8 (kubectl reads it so), or point KUBECONFIG "
                           "elsewhere") from e
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise _not_yaml(e, str(path)) from e


def _no_kubeconfig(service_account_namespace: Path) -> str:
    """The namespace with no kubeconfig: the in-cluster service account's, else ``default``."""
    with contextlib.suppress(OSError):
        return service_account_namespace.read_text().strip() or "default"
    return "default"


def _not_yaml(e: yaml.YAMLError, path: str | None = None) -> ClusterError:
    """A kubeconfig (``path``, else the file the error names) that does not parse, named with
    the line of the first problem."""
    mark = getattr(e, "problem_mark", None)
    name = getattr(mark, "name", None)
    where = path or (name if name and not name.startswith("<") else _config_file())
    line = f" (line {mark.line + 1})" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return ClusterError(f"kubeconfig {where} is not valid YAML{line}: {problem}",
                        "fix it (kubectl config view reads it too), or point KUBECONFIG elsewhere")


def _unreadable(e: OSError) -> ClusterError:
    """A kubeconfig path that exists but cannot be read as a file (a folder, no permission)."""
    return ClusterError(f"kubeconfig {e.filename or _config_file()} cannot be read: "
                        f"{e.strerror or e}",
                        "point KUBECONFIG at the kubeconfig file itself (kubectl config view)")


def _not_kubeconfig() -> ClusterError:
    """A kubeconfig that is YAML but not one (``[]``, a number, ``clusters: 5``): kubectl refuses
    it too. Names the first part of the wrong shape (:func:`_shape_problem`)."""
    return _shape_problem() or _wrong_shape(_config_file(), _TOP)


_TOP = "its top level is not a mapping (apiVersion, clusters, users, contexts)"
# The fields of client-go's clientcmd/api/v1 types that hold base64 (``[]byte`` in JSON): the
# client library decodes them with base64.standard_b64decode and raised binascii.Error (a trial:
# a traceback, exit 1, in deploy, doctor and verify --cluster k8s).
_BASE64 = {"clusters": ("cluster", ("certificate-authority-data",)),
           "users": ("user", ("client-certificate-data", "client-key-data"))}


def _shape_problem() -> ClusterError | None:
    """The first part of a kubeconfig file of the wrong shape, named (client-go clientcmd/api/v1
    ``Config``: the top level a mapping; ``clusters``, ``contexts``, ``users`` lists of mappings,
    each with a mapping under ``cluster``/``context``/``user``; the ``*-data`` fields base64);
    None when every file has the right shape, or cannot be read as YAML (the client names that).
    """
    for path in filter(None, _config_file().split(os.pathsep)):
        try:  # a named pipe would block the client's read for good (a trial: cluster.render)
            doc = _load(Path(path))
        except ClusterError as e:
            return e
        if doc is None:
            continue
        if not isinstance(doc, dict):
            return _wrong_shape(path, _TOP)
        for key, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            entries = doc.get(key) or []
            if not isinstance(entries, list) or not all(isinstance(x, dict) for x in entries):
                return _wrong_shape(path, f"'{key}' is not a list of mappings")
            names = [entry.get("name") for entry in entries]
            twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
            if twice is not None:  # kubectl: error loading config file: duplicate name in list
                return _wrong_shape(path, f"two {key} are named {str(twice)[:80]!r}")
            for entry in entries:
                body = entry.get(inner) or {}
                name = str(entry.get("name"))[:80]
                if not isinstance(body, dict):
                    return _wrong_shape(path, f"{key[:-1]} {name!r}: '{inner}' is not a mapping")
                for field in _BASE64.get(key, ("", ()))[1]:
                    if field in body and not _is_base64(body[field]):
                        return _wrong_shape(path, f"{key[:-1]} {name!r}: {field} is not base64")
    return None


def _is_base64(value: Any) -> bool:
    try:
        return isinstance(value, str) and bool(base64.b64decode(value, validate=True) or True)
    except (binascii.Error, ValueError):
        return False


def _wrong_shape(path: str, why: str) -> ClusterError:
    return ClusterError(f"kubeconfig {path} is not a kubeconfig: {why}",
                        "fix it (kubectl config view reads it too), or point KUBECONFIG elsewhere")


def connect(settings: Settings) -> Api:
    """Connect with the kubeconfig: ``$KUBECONFIG`` (a ``:``-separated list) or ``~/.kube/config``,
    context ``settings.cluster.context`` or the current one; else the in-cluster service account.

    Raises:
        ClusterError: no kubeconfig and not inside a cluster, a kubeconfig that is not YAML or
            of the wrong shape (:func:`_shape_problem`), or an unknown context.
    """
    config_file = _config_file()
    wrong = _shape_problem()
    if wrong:
        raise wrong
    current = _current_context()  # kubectl's, not the client's (the last file's)
    context = settings.cluster.context or (current[1] if current else None)
    try:
        client = kubernetes.config.new_client_from_config(config_file=config_file, context=context)
    except yaml.YAMLError as e:
        raise _not_yaml(e) from e
    except TypeError as e:
        raise _not_kubeconfig() from e
    except (ConfigException, FileNotFoundError) as e:
        missing = (_names_missing(e) or _names_no_context(e) or _names_missing_file(e, context)
                   if isinstance(e, ConfigException) else None)
        if missing:
            raise missing from e
        try:
            kubernetes.config.load_incluster_config()
            client = kubernetes.client.ApiClient()
        except ConfigException:
            paths = [p for p in config_file.split(os.pathsep) if p]
            if not any(Path(p).exists() for p in paths):  # trial 20: the client's "Invalid
                # kube-config file. No configuration found." for KUBECONFIG= (read as unset,
                # as kubectl reads it)
                empty = "KUBECONFIG" in os.environ and not os.environ["KUBECONFIG"]
                why = (f"no kubeconfig: {', '.join(paths)} does not exist"
                       + (" (KUBECONFIG is set but empty, which kubectl reads as unset)"
                          if empty else "") + ", and this is not a pod in a cluster")
            else:
                why = f"no usable kubeconfig ({e})".replace("\n", " ")
            raise ClusterError(
                why,
                "set KUBECONFIG or create ~/.kube/config (and PADDLECD_CLUSTER_CONTEXT to pick a "
                "context); or run with --cluster local",
            ) from e
    except OSError as e:
        raise _unreadable(e) from e
    _probe(client)
    return Api(
        core=kubernetes.client.CoreV1Api(client),
        batch=kubernetes.client.BatchV1Api(client),
        custom=kubernetes.client.CustomObjectsApi(client),
        context=context or "(current)",
    )


def _probe(client: Any) -> None:
    """Ask the API server for its version once, so an unreachable server is one clear error up front
    (the client would otherwise raise urllib3's MaxRetryError from the first create)."""
    host = client.configuration.host
    try:
        kubernetes.client.VersionApi(client).get_code(_request_timeout=15)
    except ApiException:
        return  # it answered: reachable (auth and RBAC are judged per request)
    except (urllib3.exceptions.HTTPError, OSError) as e:
        reason = network_reason(getattr(e, "reason", None) or e)  # trial 20: "[Errno 111] …"
        raise ClusterError(
            f"Kubernetes API server {host} unreachable: {reason}",
            "check the kubeconfig context and the network (kubectl cluster-info); "
            "or use --cluster local",
        ) from e


def translate(e: ApiException, what: str) -> ClusterError:
    """One ``ApiException`` → one ClusterError naming ``what`` ("creating Job ns/x") with a hint."""
    hints = {
        401: "your kubeconfig credentials were rejected: refresh them (kubectl get pods to check)",
        403: "your account may not do this here: check RBAC for the namespace",
        404: (
            "install the Kubeflow training operator (CRD paddlejobs.kubeflow.org), "
            "or use --kind job"
            if "PaddleJob" in what
            else "check the namespace exists (setting cluster.namespace)"
        ),
        409: "a resource of that name exists: delete it or re-run (names get a fresh suffix)",
        422: "the API server rejected the manifest: see invoke cluster.render output",
    }
    return ClusterError(
        f"{what}: {e.status} {e.reason}: {_message(e)}"[:400],
        hints.get(e.status or 0, "check the API server (kubectl cluster-info)"),
    )


def _message(e: ApiException) -> str:
    with contextlib.suppress(Exception):
        return str(json.loads(e.body).get("message", "")).replace("\n", " ")
    return str(e.body or "")[:200]


def create(api: Api, manifest: KubeObject) -> None:
    """Create one ConfigMap, Service, Job or PaddleJob in its ``metadata.namespace``.

    Raises:
        ClusterError: the API server refused it (translated), or an unknown kind.
    """
    ns, kind = manifest["metadata"]["namespace"], manifest["kind"]
    try:
        if kind == "ConfigMap":  # verify --nodes on k8s: the smoke suite (verify/nodes_k8s.py)
            api.core.create_namespaced_config_map(ns, manifest)
        elif kind == "Service":
            api.core.create_namespaced_service(ns, manifest)
        elif kind == "Job":
            api.batch.create_namespaced_job(ns, manifest)
        elif kind == "PaddleJob":
            api.custom.create_namespaced_custom_object(*PADDLEJOB[:2], ns, PADDLEJOB[2], manifest)
        else:
            raise ClusterError(
                f"cannot create kind {kind}", "render produced an unexpected manifest"
            )
    except ApiException as e:
        raise translate(e, f"creating {kind} {ns}/{manifest['metadata']['name']}") from e


def delete(api: Api, manifest: KubeObject) -> None:
    """Delete one created manifest and (for jobs) its pods; a missing object is not an error."""
    ns, name, kind = (
        manifest["metadata"]["namespace"],
        manifest["metadata"]["name"],
        manifest["kind"],
    )
    body = kubernetes.client.V1DeleteOptions(propagation_policy="Background")
    try:
        if kind == "ConfigMap":
            api.core.delete_namespaced_config_map(name, ns)
        elif kind == "Service":
            api.core.delete_namespaced_service(name, ns)
        elif kind == "Job":
            api.batch.delete_namespaced_job(name, ns, body=body)
        elif kind == "PaddleJob":
            api.custom.delete_namespaced_custom_object(
                *PADDLEJOB[:2], ns, PADDLEJOB[2], name, body=body
            )
    except ApiException as e:
        if e.status != 404:
            raise translate(e, f"deleting {kind} {ns}/{name}") from e


def job_conditions(api: Api, manifest: KubeObject) -> list[dict[str, str]]:
    """The job's status conditions, ``[{"type", "status", "reason", "message"}]``; ClusterError.

    A plain get: the object carries its status, and it needs only ``get`` on ``jobs`` /
    ``paddlejobs`` — the ``/status`` subresource is a separate RBAC resource (``jobs/status``,
    ``paddlejobs/status``) that a Role naming only the kinds does not grant (docs/kubernetes.md)."""
    ns, name, kind = (
        manifest["metadata"]["namespace"],
        manifest["metadata"]["name"],
        manifest["kind"],
    )
    try:
        if kind == "Job":
            conds = api.batch.read_namespaced_job(name, ns).status.conditions or []
            return [
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason or "",
                    "message": c.message or "",
                }
                for c in conds
            ]
        obj = api.custom.get_namespaced_custom_object(*PADDLEJOB[:2], ns, PADDLEJOB[2], name)
        return [
            {k: str(c.get(k) or "") for k in ("type", "status", "reason", "message")}
            for c in (obj.get("status") or {}).get("conditions") or []
        ]
    except ApiException as e:
        raise translate(e, f"reading {kind} {ns}/{name}") from e


def pods(api: Api, namespace: str, job_id: str) -> list[KubeObject]:
    """The job's pods as plain dicts (``metadata``/``spec``/``status``, camelCase as on the
    wire)."""
    try:
        items = api.core.list_namespaced_pod(
            namespace, label_selector=f"paddlecd.io/job={job_id}"
        ).items
    except ApiException as e:
        raise translate(e, f"listing pods of {namespace}/{job_id}") from e
    return [api.core.api_client.sanitize_for_serialization(p) for p in items]


def stream_log(api: Api, namespace: str, pod: str, container: str) -> Any:
    """Follow a pod's log: an iterator of ``bytes`` lines until the container exits. Raises
    ClusterError."""
    try:
        return api.core.read_namespaced_pod_log(
            pod, namespace, container=container, follow=True, _preload_content=False
        )
    except ApiException as e:
        raise translate(e, f"reading the log of pod {namespace}/{pod}") from e


def read_log(api: Api, namespace: str, pod: str, container: str) -> str:
    """A pod's whole log as text (not followed). The raw bytes are decoded here: the client's
    own decoding would turn a log whose lines look like JSON into Python reprs.

    Raises:
        ClusterError: the API server refused (translated), e.g. the pod is gone.
    """
    try:
        response = api.core.read_namespaced_pod_log(
            pod, namespace, container=container, _preload_content=False
        )
        return response.data.decode("utf-8", "replace")
    except ApiException as e:
        raise translate(e, f"reading the log of pod {namespace}/{pod}") from e
