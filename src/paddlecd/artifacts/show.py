"""One stored model version as a person or a script reads it: ``invoke artifacts.show``.

The manifest (files, format, Paddle version and where it came from, InputSpec, the
producing image, the ONNX output) and the stored model check (``check.json``: status, the image
it ran in, its cases, the ONNX parity), read from the store, nothing computed anew; and the
model's signature (``model.sig``) checked against the trusted keys and the manifest
(:func:`paddlecd.artifacts.signature.check`: the files' bytes are checked by a download).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import signature as sig
from paddlecd.artifacts import transfer as arts
from paddlecd.errors import ConfigError, StorageError
from paddlecd.signing.keys import TrustedKey


@dataclass(frozen=True)
class Shown:
    """A stored version: ``url`` (``<store>/<name>/<version>``), its ``manifest`` (validated) and
    its ``check`` record (None: never checked; ``{"status": "invalid", …}``: unreadable), and
    its verified ``signature`` (:meth:`paddlecd.artifacts.signature.Checked.to_json`; None: not
    checked)."""

    url: str
    name: str
    version: str
    manifest: dict[str, Any]
    check: dict[str, Any] | None
    signature: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"url", "name", "version", "manifest", "check", "signature"}``
        (``artifacts.show --json``)."""
        return {"url": self.url, "name": self.name, "version": self.version,
                "manifest": self.manifest, "check": self.check, "signature": self.signature}

    def lines(self) -> list[str]:
        """The version for humans, one fact a line."""
        doc = self.manifest
        paddle = (f"{doc['paddle_version']} (from the {doc.get('paddle_version_from')})"
                  if doc["paddle_version"] else "unknown (no --image label, no --paddle-version)")
        out = [f"{self.name} {self.version}  {self.url}",
               f"  format      {doc['format']} (prefix {doc['model_prefix']})",
               f"  paddle      {paddle}",
               f"  image       {(doc['image'] or {}).get('reference') or '-'}",
               f"  input_spec  {_specs(doc.get('input_spec'))}",
               f"  created     {doc['created']}  git {doc['git_revision'] or '-'}  "
               f"{doc.get('tool') or ''}".rstrip()]
        if doc["metrics"]:
            metrics = ", ".join(f"{k}={v:g}" for k, v in doc["metrics"].items())
            out.append(f"  metrics     {metrics}")
        out.append("  files")
        out += [f"    {f['path']}  {f['size']} B  sha256:{f['sha256'][:12]}" for f in doc["files"]]
        out.append(f"  onnx        {_onnx(doc.get('onnx'))}")
        out.append(f"  check       {_check(self.check)}")
        if self.signature:
            s = self.signature
            out.append(f"  signature   {s['file']} verified: key {s['keyid']} trusted via "
                       f"{s['key_source']} (OpenSSF Model Signing)")
            # what show verified: the signed file digests are the manifest's; the stored bytes
            # are not read here (a model may be GBs): download hashes each file against them
            out.append("              it signs the files' digests above; the stored bytes are "
                       "hashed by artifacts.download")
        return out


def _specs(specs: list[dict[str, Any]] | None) -> str:
    if not specs:
        return "- (a legacy program: artifacts.check reads it in the runtime image)"
    return "; ".join(f"{s['name']} {s['shape']} {s['dtype']}" for s in specs)


def _onnx(o: dict[str, Any] | None) -> str:
    if not o:
        return "- (artifacts.check NAME --image IMAGE --onnx adds one)"
    err = "" if o["max_abs_err"] is None else f", max abs error {o['max_abs_err']:.3g}"
    return (f"{o['path']}  opset {o['opset']}, paddle2onnx {o['paddle2onnx']} in {o['image']} "
            f"(Paddle {o['paddle_version']}); onnxruntime {o['onnxruntime']} parity "
            f"{o['parity']} (rtol {o['rtol']:g}, atol {o['atol']:g}, batches "
            f"{','.join(map(str, o['batches']))}{err})")


def _check(c: dict[str, Any] | None) -> str:
    if c is None:
        return "- (never checked: invoke artifacts.check NAME --image IMAGE)"
    if c.get("status") == "invalid":
        return f"invalid check.json (re-run artifacts.check): {c.get('why', '')}".rstrip(": ")
    cases = c.get("cases") or []
    bad = [f"{x['name']} ({x.get('code')})" for x in cases if not x["passed"]]
    return (f"{c['status']} in {c['image']} (Paddle {c.get('paddle_version')}, {c['created']}): "
            f"{len(cases) - len(bad)}/{len(cases)} cases passed"
            + (f"; failed: {', '.join(bad)}" if bad else ""))


def split_version(arg: str) -> tuple[str, str | None]:
    """``[<store-url>/]<name>[@<version>]`` → ``("[<store-url>/]<name>", version or None)``.

    Raises:
        ConfigError: an empty version after ``@``, or a bad version.
    """
    base, at, version = arg.rpartition("@")
    if not at:
        return arg, None
    if not version:
        raise ConfigError(f"'{arg}': no version after '@'", "write NAME@1.4.0, or NAME alone")
    return base, am.check_version(version)


def show(store: Any, name: str, version: str | None = None, *,
         trusted: Sequence[TrustedKey] | None = None) -> Shown:
    """``<name>/<version>`` of ``store`` (default: its highest complete version); with
    ``trusted`` (the tasks always pass it) its ``model.sig`` is checked.

    Raises:
        ConfigError: bad name or version; no version given and the highest complete ones differ
            only in build metadata (:func:`~paddlecd.artifacts.manifest.highest`).
        StorageError: no such model or version (or it is an unfinished upload), the store failed.
        InvalidManifestError: the manifest is invalid.
        ModelSignatureError: with ``trusted``: the signature is missing, empty, by no trusted key
            or not of the manifest's files.
    """
    if version is None:
        complete = [v["version"] for v in arts.list_model(store, name) if v["complete"]]
        if not complete:
            raise StorageError(f"{store.url}/{name} has no complete version", "upload one first")
        version = am.highest(complete, where=f"{store.url}/{name}")
    am.check_name(name)
    prefix = f"{name}/{version}/"
    doc = arts.read_manifest(store, prefix)
    if doc is None:
        raise StorageError(f"no model at {store.url}/{prefix} (no {am.MANIFEST})",
                           f"invoke artifacts.list {store.url}/{name}")
    arts.check_placed(doc, store, name, version)
    checked = None if trusted is None else sig.check(
        store.get_bytes(prefix + sig.SIGNATURE), doc, trusted,
        where=f"{store.url}/{prefix}{sig.SIGNATURE}")
    return Shown(f"{store.url}/{name}/{version}", name, version, doc, _check_record(store, prefix),
                 None if checked is None else checked.to_json())


def _check_record(store: Any, prefix: str) -> dict[str, Any] | None:
    raw = store.get_bytes(prefix + am.CHECK_JSON)
    if raw is None:
        return None
    from paddlecd.errors import ConfigError

    try:
        return am.read_check_record(raw, where=prefix + am.CHECK_JSON)
    except ConfigError as e:
        return {"status": "invalid", "why": e.cause}
