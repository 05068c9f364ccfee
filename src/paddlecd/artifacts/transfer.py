"""Upload, download and list ``paddle.jit.save`` models in an object store.

Layout: ``<store>/<name>/<version>/`` holds the export's files and ``manifest.json``, written last,
so a reader that finds a manifest finds a complete model. Objects under a version with no manifest
(an interrupted upload) or not named by it are leftovers, removed by the next upload of that version
and listed as incomplete meanwhile. Two uploads of one version at once: each claims the
version before writing (``Store.claim``) and writes a new manifest only if none exists, so exactly
one wins and the other fails with :class:`ConflictError` without touching the winner's files.
Integrity is the sha256 in the manifest, never the ETag (multipart ETags are not MD5s). Plan, then
act (STYLE.md §9): :func:`plan_upload` only reads; :func:`upload` carries a plan out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import program
from paddlecd.artifacts import signature as sig
from paddlecd.artifacts.storage import (  # noqa: F401 (re-exported)
    Progress,
    Store,
    default_store_url,
    split_model_url,
    store_for,
)
from paddlecd.artifacts.storage.base import ConflictError  # noqa: F401 (re-exported)
from paddlecd.errors import ConfigError, ModelSignatureError, StorageError
from paddlecd.files import (
    NO_SPACE,
    disk_full,
    free_space,
    json_problem,
    publish_folder,
    staging_folder,
    unique_keys,
)
from paddlecd.signing.keys import TrustedKey
from paddlecd.types import ModelManifest

# Placeholder sha256 of a file hashed while it uploads (see plan_upload); never written to a store.
PENDING = "0" * 64


class InvalidManifestError(StorageError):
    """A stored manifest is not JSON or does not match the schema."""


@dataclass
class UploadPlan:
    """What :func:`upload` will do. ``action``: ``create``, ``overwrite``, ``sign`` (the same
    model, stored without ``model.sig``: signed, its manifest written again), ``repair`` (the same
    model, some stored files' bytes differ from the manifest: those put again, signed again, the
    check records removed) or ``unchanged``;
    ``put``: entries whose bytes move; ``stale``: keys (relative to the store) to delete;
    ``deferred``: the ``put`` files are hashed while they upload (their sha256 is :data:`PENDING`);
    ``overwrite``: the user allowed replacing a different model (and a killed upload's claim);
    ``signer``: the key that signs the export into ``model.sig`` (None: stored unsigned)."""

    url: str
    prefix: str
    export: am.Export
    manifest: dict[str, Any]
    action: str
    put: list[am.FileEntry] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    deferred: bool = False
    overwrite: bool = False
    signer: sig.ModelSigner | None = None

    @property
    def bytes_to_move(self) -> int:
        """Object bytes the upload sends (0 for an unchanged model; the manifest is not counted)."""
        return sum(e.size for e in self.put)

    def lines(self) -> list[str]:
        """The plan for humans, one line per step."""
        out = [f"plan: {self.action} {self.url} ({self.export.format}, from {self.export.folder})"]
        doc = self.manifest
        out.append(
            f"  paddle {doc['paddle_version']} (from the {doc['paddle_version_from']})"
            if doc["paddle_version"]
            else "  paddle version unknown (give --image repo@sha256:… or --paddle-version)"
        )
        out += [
            f"  put    {e.path}  {e.size} B  "
            + ("sha256 while uploading" if e.sha256 == PENDING else f"sha256:{e.sha256[:12]}")
            for e in self.put
        ]
        if self.action == "repair":
            out.append("  (the stored bytes of the files put differ from the manifest: "
                       "changed in the store)")
        out += [f"  delete {k}  (not in the manifest: leftover)" for k in self.stale]
        out += [f"  skip   {f}  (in the folder, not part of the jit.save export: not stored)"
                for f in self.export.extra]
        if self.action != "unchanged" and self.signer:
            out.append(f"  put    {sig.SIGNATURE}  (OpenSSF Model Signing, key "
                       f"{self.signer.keyid} from {self.signer.source})")
        if self.action != "unchanged":
            out.append(f"  put    {am.MANIFEST}  (last)")
        out.append(f"  {self.bytes_to_move} bytes to move")
        return out


def plan_upload(
    store: Store,
    model_dir: Path,
    *,
    name: str,
    version: str,
    image: str | None = None,
    metrics: Path | None = None,
    paddle_version: str | None = None,
    git_revision: str | None = None,
    overwrite: bool = False,
    image_paddle: str | None = None,
    signer: sig.ModelSigner | Callable[[], sig.ModelSigner] | None = None,
) -> UploadPlan:
    """Check the inputs and the store, hash the export, and decide what to move (reads only).

    When the version holds no manifest there is nothing to compare with, so hashing is deferred to
    :func:`upload`, which runs it on another thread while the bytes move (hashlib releases the GIL):
    the sha256 then costs no wall time (>= 0.95x the throughput of bare boto3).

    Args:
        store: the target store; the model goes under ``<name>/<version>/``.
        model_dir: the folder given to ``paddle.jit.save``.
        image: ``repo@sha256:…`` of the image that produced the model, or None.
        metrics: a JSON file of metric name → number, or None.
        paddle_version: recorded as is (``paddle_version_from: flag``).
        image_paddle: the Paddle version the producing image declares (its label, read by
            :func:`paddlecd.artifacts.runtime.paddle_version`); recorded when ``paddle_version``
            is not given (``paddle_version_from: image``). Never the uploading host's Paddle:
            with neither, ``paddle_version`` is null.
        overwrite: replace a different model already stored under this name and version.
        signer: signs the export (``model.sig``, :mod:`paddlecd.artifacts.signature`), or a
            function returning it, called once the inputs are checked (so a bad input is named
            before a missing key); the tasks always pass one, None stores the model unsigned
            (the tasks' download then refuses it).

    Raises:
        ConfigError: bad name, version, Paddle version, image reference, metrics file, or not a
            jit.save export;
            a ``<prefix>.onnx`` without its ``check.json`` record, or whose parity failed.
        StorageError: the store is unreachable/refuses us, or (without ``overwrite``) the version
            already holds a different model.
        SigningKeyError: ``signer`` found no usable key.
    """
    am.check_name(name), am.check_version(version), am.check_paddle_version(paddle_version)
    export = am.find_export(model_dir)
    meta = _meta(export, image=image, metrics=metrics, git_revision=git_revision,
                 paddle_version=paddle_version, image_paddle=image_paddle)
    signer = signer() if callable(signer) else signer
    prefix = f"{name}/{version}/"
    _check_key_lengths(store, prefix, export)
    store.check()
    old = _read_manifest_or_none(store, prefix)
    doc = am.build_manifest(export, _entries(export, hashed=old is not None), name=name,
                            version=version, **meta)
    plan = UploadPlan(url=f"{store.url}/{name}/{version}", prefix=prefix, export=export,
                      manifest=doc, action="create", deferred=old is None, overwrite=overwrite,
                      signer=signer)
    return _decide(plan, store, old, overwrite=overwrite)


def _check_key_lengths(store: Store, prefix: str, export: am.Export) -> None:
    """Refuse, before anything is written, an upload whose longest object key is past the
    store's limit (S3: 1024 bytes): a trial's long prefix failed at the first PUT with the
    store's InvalidObjectName and the hint "see the logs".

    Raises:
        ConfigError: naming the key's length, the limit and the store URL.
    """
    limit = getattr(store, "MAX_KEY_BYTES", None)
    if limit is None:
        return
    names = (*export.files, am.MANIFEST, sig.SIGNATURE)
    longest = max((store.object_key(prefix + n) for n in names), key=lambda k: len(k.encode()))
    if len(longest.encode()) > limit:
        raise ConfigError(f"{store.url}/{prefix}: the object key {longest[:60]}… would be "
                          f"{len(longest.encode())} bytes; S3 keys are at most {limit}",
                          "use a shorter store prefix (storage.url / --to), model name or "
                          "version")


def _meta(export: am.Export, *, image: str | None, metrics: Path | None,
          git_revision: str | None, paddle_version: str | None,
          image_paddle: str | None) -> dict[str, Any]:
    """The manifest fields of an upload besides its files, each input checked (ConfigError)."""
    specs = program.inputs_of(export.folder, export.prefix, export.format)
    return {
        "image": am.parse_image(image),
        "metrics": am.load_metrics(metrics),
        "git_revision": git_revision,
        "paddle_version": paddle_version or image_paddle,
        "paddle_version_from": "flag" if paddle_version else "image" if image_paddle else None,
        "input_spec": None if specs is None else [s.to_json() for s in specs],
        "onnx": _onnx_record(export),
    }


def _entries(export: am.Export, *, hashed: bool) -> list[am.FileEntry]:
    """The export's files, hashed now (there is a stored manifest to compare with) or with the
    sha256 :data:`PENDING` (hashed by :func:`upload` while the bytes move)."""
    return [
        am.hash_file(export.folder / f)
        if hashed
        else am.FileEntry(f, (export.folder / f).stat().st_size, PENDING)
        for f in export.files
    ]


def _onnx_record(export: am.Export) -> dict[str, Any] | None:
    """The folder's ONNX output, refused when its parity check failed."""
    record = am.onnx_record(export)
    if record is not None and record["parity"] == "failed":
        raise ConfigError(
            f"{export.folder / record['path']} failed its ONNX Runtime parity check "
            f"(max abs error {record['max_abs_err']}, rtol {record['rtol']}, "
            f"atol {record['atol']})",
            "see check.json; delete the .onnx to upload the Paddle files alone",
        )
    return record


def _decide(
    plan: UploadPlan, store: Store, old: ModelManifest | None, *, overwrite: bool
) -> UploadPlan:
    new = am.entries_of(plan.manifest)
    present = {o.key for o in store.list(plan.prefix)}
    plan.stale = sorted(k for k in present
                        if k[len(plan.prefix) :] not in {*new, am.MANIFEST, sig.SIGNATURE})
    given = _given_differs(old, plan.manifest) if old is not None else []
    if given and plan.signer and not (plan.prefix + sig.SIGNATURE in present and plan.signer.holds(
            store.get_bytes(plan.prefix + sig.SIGNATURE), old)):
        given = []  # a manifest edited in (or unsigned by) the store: signed again below, as given
    if given and not overwrite:  # same files, other provenance: "unchanged" would drop the flag
        raise StorageError(
            f"{plan.url} already holds this model with other provenance ({'; '.join(given)})",
            "bump --version, or pass --overwrite to record the new values",
        )
    if old is not None and am.entries_of(old) == new and not given:
        plan.action = "unchanged"  # the check of this very model still holds: keep it
        plan.stale = [k for k in plan.stale if k[len(plan.prefix) :] not in am.CHECK_FILES]
        plan.put = _changed_in_store(store, plan.prefix, new)
        if plan.put:
            plan.action = "repair"  # stored bytes changed by hand: put the export's again
            plan.stale = [*plan.stale, *(plan.prefix + c for c in am.CHECK_FILES
                                         if plan.prefix + c in present)]
            return plan
        if plan.signer and plan.prefix + sig.SIGNATURE not in present:
            plan.action = "sign"  # stored before models were signed: sign it, move no file
        elif plan.signer and not plan.signer.holds(store.get_bytes(plan.prefix + sig.SIGNATURE),
                                                   old):
            plan.action = "sign"  # empty, damaged or another key's (a trial: its hint said
            # "re-upload", and the re-upload kept it as unchanged): signed again, no file moves
        return plan
    if old is not None and not overwrite:
        raise StorageError(
            f"{plan.url} already holds a different model ({_difference(old, new)})",
            "bump --version, or pass --overwrite to replace it",
        )
    kept = am.entries_of(old) if old else {}
    plan.action = "overwrite" if old is not None else "create"
    plan.put = [e for p, e in new.items() if kept.get(p) != e]  # identical files stay in place
    return plan


def _changed_in_store(store: Store, prefix: str, listed: Mapping[str, am.FileEntry]
                      ) -> list[am.FileEntry]:
    """The entries of ``listed`` whose stored object is missing or holds other bytes than the
    manifest says (a trial: a stored file edited by hand was "unchanged" on re-upload, since only
    the manifests were compared). Sizes first (one listing), then each object's sha256 as stored:
    every byte is read once, the price of "unchanged" meaning what is stored."""
    sizes = {o.key: o.size for o in store.list(prefix)}
    return [e for p, e in listed.items()
            if sizes.get(prefix + p) != e.size or store.sha256(prefix + p) != e.sha256]


def _read_manifest_or_none(store: Store, prefix: str) -> ModelManifest | None:
    """The stored manifest; an unreadable one counts as another model (``--overwrite`` fixes it)."""
    try:
        return read_manifest(store, prefix)
    except InvalidManifestError as e:
        return {"files": [], _UNREADABLE: e.cause}


_UNREADABLE = "_unreadable"  # what a stored manifest that does not read stands for (its cause)


PROVENANCE = ("image", "paddle_version", "metrics")  # what upload's flags put in a manifest


def _given_differs(old: ModelManifest, new: ModelManifest) -> list[str]:
    """Each :data:`PROVENANCE` field this upload gives (not None) that the stored manifest
    records otherwise, as ``field 'stored' (given 'new')``."""
    return [f"{key} {'not recorded' if old.get(key) is None else _shown(old.get(key))} "
            f"(given {_shown(new[key])})" for key in PROVENANCE
            if new.get(key) is not None and new.get(key) != old.get(key)]


def _shown(value: Any) -> str:
    """A provenance value for a message: an image record by its reference, metrics as JSON."""
    if isinstance(value, dict) and "reference" in value:
        return str(value["reference"])
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def _difference(old: ModelManifest, new: dict[str, am.FileEntry]) -> str:
    if old.get(_UNREADABLE):  # a trial: "differs in" every file, the same bytes as stored
        return f"its {am.MANIFEST} does not read: {str(old[_UNREADABLE])[:200]}"
    before = am.entries_of(old) if old.get("files") else {}
    changed = sorted(
        set(before) ^ set(new) | {p for p in set(before) & set(new) if before[p] != new[p]}
    )
    return "differs in " + ", ".join(changed) if changed else "its manifest is unreadable"


def upload(store: Store, plan: UploadPlan, *, progress: Progress | None = None) -> UploadPlan:
    """Carry out ``plan``: claim the version, remove leftovers (objects and unfinished multipart
    uploads), put the files, then the manifest (last), then release the claim.

    On overwrite the old manifest goes first, so a reader never sees it naming deleted or
    half-replaced files. An unchanged model with no leftovers writes nothing and claims nothing;
    it only removes the claim a killed upload of it left (``Store.release_abandoned``).

    Raises:
        ConfigError: a file of the export became a symlink out of its folder since the plan.
        ConflictError: another upload of this version is running, or finished after ``plan`` was
            made; nothing under the version was written by this call.
        StorageError: a write failed; no manifest is written, and the next upload cleans up.
    """
    if plan.action == "unchanged" and not plan.stale:
        store.release_abandoned(plan.prefix)  # the claim of a run killed after its last write
        return plan
    am.check_links(plan.export)  # again: a file may have become a link since the plan was made
    with store.claim(plan.prefix, take_over=plan.overwrite):
        _check_unclaimed_meanwhile(store, plan)
        _write(store, plan, progress)
    return plan


def _check_unclaimed_meanwhile(store: Store, plan: UploadPlan) -> None:
    """Planning reads without the claim: a model stored since then belongs to the other upload."""
    if plan.action == "create" and store.head(plan.prefix + am.MANIFEST) is not None:
        raise ConflictError(
            f"{plan.url} was uploaded by another process while this one planned",
            "re-run: the same model is then unchanged; a different one needs "
            "another --version (or --overwrite)",
        )


def _write(store: Store, plan: UploadPlan, progress: Progress | None) -> None:
    if plan.action in (
        "overwrite", "sign", "repair"
    ):  # first, so no manifest ever names a deleted or half-replaced file
        store.delete([plan.prefix + am.MANIFEST])
    store.delete(plan.stale)
    store.abort_uploads(plan.prefix)
    if plan.action == "unchanged":
        return
    export = plan.export
    with ThreadPoolExecutor(max_workers=1) as hasher:
        # one pass over the bytes while they upload (hashlib releases the GIL): the signature,
        # whose signed sha256 values are the manifest's; unsigned, the sha256 alone
        if plan.signer:
            hashing = [hasher.submit(sig.sign, plan.signer, export.folder, export.files,
                                     name=plan.manifest["name"], manifest=plan.manifest)]
        else:
            hashing = [hasher.submit(am.hash_file, export.folder / e.path)
                       for e in plan.put if plan.deferred]
        for entry in plan.put:
            store.put_file(export.folder / entry.path, plan.prefix + entry.path, progress=progress)
        if plan.signer:
            signed = hashing[0].result()
            _signed_as_planned(plan, signed)
            store.put_bytes(signed.data, plan.prefix + sig.SIGNATURE)
        elif hashing:
            plan.put = [f.result() for f in hashing]
            plan.manifest = am.validate_manifest(
                {**plan.manifest, "files": [vars(e) for e in plan.put]},
                where=plan.url,
                error=StorageError,
            )
    _check_stored(store, plan)
    # exclusive: if anything wrote a manifest despite the claim (a claim taken over), it stays
    body = am.manifest_bytes(plan.manifest)
    store.put_bytes(body, plan.prefix + am.MANIFEST, exclusive=True)
    if store.get_bytes(plan.prefix + am.MANIFEST) != body:  # a trial: answered 200, kept none
        raise StorageError(f"{plan.url}/{am.MANIFEST}: the store took the manifest but does not "
                           "serve it", "the version is not visible: check the store (and any "
                           "proxy in front of it), then re-run the same upload")


def _check_stored(store: Store, plan: UploadPlan) -> None:
    """Before the manifest: every file it names is in the store with its size (one listing). A
    trial's store answered CompleteMultipartUpload with success and stored nothing: the
    manifest then named a file that was not there, exit 0.

    Raises:
        StorageError: naming the file, what the store holds, and that no manifest was written.
    """
    held = {o.key: o.size for o in store.list(plan.prefix)}
    for f in plan.manifest["files"]:
        size = held.get(plan.prefix + f["path"])
        if size != f["size"]:
            raise StorageError(
                f"{plan.url}/{f['path']}: the store took the upload but holds "
                + ("no such object" if size is None else f"{size} bytes, not {f['size']}"),
                "no manifest was written: check the store (its multipart completion) and re-run")


def _signed_as_planned(plan: UploadPlan, signed: sig.Signed) -> None:
    """Take the signed sha256 values into the manifest; a file hashed at planning time must
    still have them (it changed meanwhile otherwise, and its upload is refused)."""
    by_path = {e.path: e for e in signed.entries}
    changed = [f["path"] for f in plan.manifest["files"]
               if f["sha256"] != PENDING and by_path[f["path"]].sha256 != f["sha256"]]
    if changed:
        raise StorageError(
            f"{plan.export.folder}: {', '.join(changed)} changed while uploading",
            "re-run the upload once the export is complete; no manifest was written")
    plan.put = [by_path[e.path] for e in plan.put]
    plan.manifest = am.validate_manifest(
        {**plan.manifest, "files": [vars(by_path[f["path"]]) for f in plan.manifest["files"]]},
        where=plan.url, error=StorageError)


@dataclass(frozen=True)
class Uploaded:
    """The result of an upload for scripts (``invoke upload --json``).

    Attributes:
        url: ``<store>/<name>/<version>`` of the model. name, version: as given.
        action: ``create``, ``overwrite``, ``sign``, ``repair`` or ``unchanged``.
        executed: False for ``--dry-run``.
        files: files of the export named by the manifest; bytes: their total size (B);
            bytes_moved: bytes this run sent (0 when unchanged or planned only).
        manifest_digest: ``sha256:<hex>`` of ``manifest.json`` as stored (None when not written
            yet: a dry run of a new or replaced model). image_digest: the producing image's digest.
    """

    url: str
    name: str
    version: str
    action: str
    executed: bool
    files: int
    bytes: int
    bytes_moved: int
    manifest_digest: str | None
    image_digest: str | None

    def to_json(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return asdict(self)


def uploaded(store: Store, plan: UploadPlan, *, executed: bool) -> Uploaded:
    """The :class:`Uploaded` record of ``plan`` once :func:`upload` ran it (``executed``) or not.

    The manifest digest is read back from the store (one GET), so it names the bytes stored.

    Raises:
        StorageError: the store failed reading the manifest back.
    """
    raw = (
        store.get_bytes(plan.prefix + am.MANIFEST)
        if executed or plan.action == "unchanged"
        else None
    )
    # what is stored: an unchanged version keeps its manifest (a trial: "image_digest": null for
    # a version stored with one, the re-run given no --image)
    stored = json.loads(raw) if raw and plan.action == "unchanged" else plan.manifest
    files = stored["files"]
    return Uploaded(
        url=plan.url,
        name=plan.manifest["name"],
        version=plan.manifest["version"],
        action=plan.action,
        executed=executed,
        files=len(files),
        bytes=sum(f["size"] for f in files),
        bytes_moved=plan.bytes_to_move if executed else 0,
        manifest_digest=f"sha256:{hashlib.sha256(raw).hexdigest()}" if raw else None,
        image_digest=(stored.get("image") or {}).get("digest"),
    )


def read_manifest(store: Store, prefix: str) -> ModelManifest | None:
    """The manifest under ``prefix`` (``<name>/<version>/``), validated; None when there is none.

    Raises:
        InvalidManifestError: it is not JSON or does not match the schema.
        StorageError: the store failed.
    """
    raw = store.get_bytes(prefix + am.MANIFEST)
    if raw is None:
        return None
    where = f"{store.url}/{prefix}{am.MANIFEST}"
    if raw.lstrip()[:1] == b"<":  # a trial: a sign-in portal's page was "not JSON", with the
        # hint to overwrite a healthy model
        raise StorageError(f"{where}: the store answered a web page (HTML), not the file",
                           "something other than the store answered: check "
                           "storage.endpoint_url and any proxy in between (HTTP(S)_PROXY)")
    try:  # a key given twice (a trial: "name" twice, the last one right) is not a manifest
        doc = json.loads(raw, object_pairs_hook=unique_keys)
    except ValueError as e:
        raise InvalidManifestError(  # "not JSON: …", "not UTF-8 text (byte 0)", "empty"
            f"{where}: {json_problem(e)}", "re-upload the model with --overwrite"
        ) from e
    return am.validate_manifest(doc, where=where, error=InvalidManifestError)


def check_placed(doc: Mapping[str, Any], store: Store, name: str, version: str) -> None:
    """The manifest read at ``<name>/<version>/`` names that same model and version (a trial: a
    version copied to another folder was shown and downloaded as "verified", since the
    signature covers the files, not the folder they are stored under).

    Raises:
        InvalidManifestError: it names another name or version.
    """
    if (doc.get("name"), doc.get("version")) != (name, version):
        raise InvalidManifestError(
            f"{store.url}/{name}/{version}/{am.MANIFEST} is the manifest of "
            f"{doc.get('name')} {doc.get('version')}: copied or changed by hand",
            f"download {doc.get('name')} {doc.get('version')} by its own name, or re-upload "
            "this version",
        )


def download(
    store: Store,
    name: str,
    version: str,
    dest: Path,
    *,
    progress: Progress | None = None,
    on_size: Progress | None = None,
    trusted: Sequence[TrustedKey] | None = None,
) -> ModelManifest:
    """Fetch ``<name>/<version>`` into ``dest`` (created; must be absent or empty), verifying every
    sha256 and, with ``trusted``, the model's signature (``model.sig``, fetched beside the files).

    Files land in a temp folder next to ``dest`` that is renamed into place only after all checks
    pass.

    Args:
        on_size: receives the total bytes to fetch once the manifest is read.
        trusted: the keys a model's signature must verify with (the tasks always pass them;
            None fetches without checking a signature).

    Returns:
        The manifest (also written to ``dest/manifest.json``).

    Raises:
        ConfigError: bad name/version, or ``dest`` is not empty.
        StorageError: no such model, or a transfer failed.
        ModelSignatureError: a file's sha256 or size differs from the manifest (exit 6, a
            verification failure); with ``trusted``: ``model.sig`` missing, empty, by no trusted
            key, or not the signature of these files (:func:`paddlecd.artifacts.signature.check`).
    """
    am.check_name(name), am.check_version(version)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(
            f"destination {dest} exists and is not an empty folder", "pick a new folder"
        )
    prefix = f"{name}/{version}/"
    doc = _stored_manifest(store, name, version)
    where = f"{store.url}/{prefix}{sig.SIGNATURE}"
    signature = store.get_bytes(prefix + sig.SIGNATURE)
    if trusted is not None:  # before any byte moves: an unsigned model is refused at once
        sig.check(signature, doc, trusted, where=where)
    if on_size:
        on_size(sum(f["size"] for f in doc["files"]))
    _land(store, prefix, doc, dest, signature=signature, trusted=trusted, where=where,
          progress=progress)
    return doc


def _stored_manifest(store: Store, name: str, version: str) -> ModelManifest:
    """The manifest of ``<name>/<version>/``, checked to be the one placed there (StorageError:
    none)."""
    prefix = f"{name}/{version}/"
    doc = read_manifest(store, prefix)
    if doc is None:
        store.check()  # a store that is a file is named so (a trial)
        raise StorageError(
            f"no model at {store.url}/{prefix} (no {am.MANIFEST})",
            f"invoke artifacts.list {store.url}/{name}",
        )
    check_placed(doc, store, name, version)
    return doc


def _land(store: Store, prefix: str, doc: ModelManifest, dest: Path, *,
          signature: bytes | None, trusted: Sequence[TrustedKey] | None, where: str,
          progress: Progress | None) -> None:
    """Fetch the files of ``doc`` into a temp folder beside ``dest``, verify them, and rename it
    into place only after every check passed."""
    # the temp folder carries this pid: one a killed download left (a trial: .big.XXXX/ with a
    # partial file, kept by every later run) is removed by the next download beside it
    tmp = staging_folder(dest, ".download")
    try:
        _fetch_verified(store, prefix, doc, tmp, progress)
        (tmp / am.MANIFEST).write_bytes(am.manifest_bytes(doc))
        if signature is not None:
            (tmp / sig.SIGNATURE).write_bytes(signature)
        if trusted is not None:
            sig.verify_folder(tmp, doc, trusted, where=where)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes 0700; the model folder gets the user's usual mode
        publish_folder(tmp, dest, "destination")
    except (OSError, StorageError) as e:  # a full disk names --dest, not the temp folder
        cause = e if isinstance(e, OSError) else e.__cause__
        if disk_full(cause):
            raise StorageError(f"downloading into {dest}: {NO_SPACE}",
                               free_space(dest.parent)) from e
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fetch_verified(
    store: Store, prefix: str, doc: dict[str, Any], folder: Path, progress: Progress | None
) -> None:
    for entry in am.entries_of(doc).values():
        target = folder / entry.path
        store.get_file(prefix + entry.path, target, progress=progress)
        got = am.hash_file(target)
        if got.sha256 != entry.sha256 or got.size != entry.size:
            # a verification failure (exit 6, docs/configuration.md's table), as a model.sig
            # that does not match; the store answered fine (a trial: exit 8, "storage")
            raise ModelSignatureError(
                f"integrity check failed for {store.url}/{prefix}{entry.path}: "
                f"sha256 {got.sha256[:12]}… "
                f"({got.size} B) != manifest {entry.sha256[:12]}… ({entry.size} B)",
                "the object changed after upload: re-upload the model with --overwrite",
            )


def list_versions(store: Store, name: str) -> list[dict[str, Any]]:
    """Versions of ``name``, ascending by :func:`~paddlecd.artifacts.manifest.version_order`
    (semver precedence, then build metadata), each a summary with the same keys: ``version``,
    ``complete`` (has a valid manifest), ``damaged`` (has a manifest that is not valid: not JSON,
    or not the schema), ``problem`` (why not complete, or None), and from the manifest
    ``created``, ``files``, ``bytes``, ``format``, ``image_digest``, ``metrics``,
    ``paddle_version``, ``git_revision`` (None for an incomplete version), and ``check``: the
    stored model check's ``status``/``image``/``paddle_version``/``created`` (None: unchecked).

    A version without a manifest (an upload running, interrupted or killed) or with an invalid one
    (damaged) is listed as not complete, never an error here; a folder whose name is no version
    (:func:`paddlecd.artifacts.manifest.check_version`) is not one and is left out.

    Raises:
        ConfigError: bad name. StorageError: the store failed.
    """
    am.check_name(name)
    versions = sorted(
        {v for o in store.list(f"{name}/") if o.key.count("/") >= 2
         and _is_version(v := o.key.split("/")[1])},
        key=am.version_order,
    )
    return [_listed(store, name, v) for v in versions]


def _listed(store: Store, name: str, version: str) -> dict[str, Any]:
    try:
        doc = read_manifest(store, f"{name}/{version}/")
        if doc is not None:  # a trial: another version's manifest, copied in, listed complete
            check_placed(doc, store, name, version)
    except InvalidManifestError as e:
        return _summary(version, None, problem=e.cause, damaged=True)
    summary = _summary(
        version, doc, problem=None if doc else f"no {am.MANIFEST} (upload unfinished)"
    )
    if doc is not None:
        summary["check"] = _check_of(store, f"{name}/{version}/")
    return summary


def _check_of(store: Store, prefix: str) -> dict[str, Any] | None:
    """The stored check's summary (``status``, ``image``, ``paddle_version``, ``created``), or
    None when the version was never checked; an unreadable record reads as ``status: invalid``."""
    raw = store.get_bytes(prefix + am.CHECK_JSON)
    if raw is None:
        return None
    try:
        doc = am.read_check_record(raw, where=prefix + am.CHECK_JSON)
        return {k: doc[k] for k in ("status", "image", "paddle_version", "created")}
    except ConfigError:
        return {"status": "invalid", "image": None, "paddle_version": None, "created": None}


def list_model(store: Store, name: str) -> list[dict[str, Any]]:
    """:func:`list_versions` for a model that must exist (``invoke artifacts.list``).

    Raises:
        ConfigError: bad name. StorageError: no version of ``name`` in the store (not even an
            interrupted one), the store failed, or a manifest is invalid.
    """
    versions = list_versions(store, name)
    if not versions:
        store.check()  # a store that is a file is named so, not "no model" (a trial)
        raise StorageError(
            f"no model named '{name}' in {store.url}",
            "check the name, or upload a version first (invoke upload …)",
        )
    return versions


def _is_version(v: str) -> bool:
    try:
        am.check_version(v)
    except ConfigError:
        return False
    return True


_SUMMARY_KEYS = (
    "created",
    "files",
    "bytes",
    "format",
    "image_digest",
    "metrics",
    "paddle_version",
    "git_revision",
    "check",
)


def _summary(version: str, doc: dict[str, Any] | None, *, problem: str | None,
             damaged: bool = False) -> dict[str, Any]:
    if doc is None:
        return {
            "version": version,
            "complete": False,
            "damaged": damaged,
            "problem": problem,
            **dict.fromkeys(_SUMMARY_KEYS),
        }
    return {
        "version": version,
        "complete": True,
        "damaged": False,
        "problem": None,
        "created": doc["created"],
        "files": len(doc["files"]),
        "bytes": sum(f["size"] for f in doc["files"]),
        "format": doc["format"],
        "image_digest": (doc["image"] or {}).get("digest"),
        "metrics": doc["metrics"],
        "paddle_version": doc["paddle_version"],
        "git_revision": doc["git_revision"],
        "check": None,
    }
