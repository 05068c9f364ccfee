"""The S3 store: S3-compatible buckets (AWS, MinIO, Ceph RGW, BOS) through boto3.

The only module that imports boto3/botocore (STYLE.md §1);
:func:`paddlecd.artifacts.storage.open_store` imports it for ``s3://`` URLs only. Every
botocore/boto3 failure is translated once, here, into :class:`~paddlecd.errors.StorageError` naming
the bucket and key (STYLE.md §5). Credentials come from the standard AWS chain (env, shared files,
SSO, instance role) and are never printed. How stores differ from AWS (Ceph RGW's 411 on
aws-chunked bodies, If-Match against unquoted ETags, ...) is in :mod:`.quirks`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from xml.etree import ElementTree

import boto3
import boto3.exceptions
import botocore.exceptions
import botocore.session
import s3transfer.exceptions
from boto3.s3.transfer import ProgressCallbackInvoker, TransferConfig, create_transfer_manager
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
)

from paddlecd.artifacts.storage import quirks as known
from paddlecd.artifacts.storage.base import (
    MIB,
    ConflictError,
    Location,
    ObjectInfo,
    Progress,
    Quirk,
    released_if_free,
)
from paddlecd.config import StorageSettings
from paddlecd.errors import ConfigError, StorageError
from paddlecd.files import environ_value, hide_userinfo

T = TypeVar("T")

# S3 multipart rule: every part but the last is at least 5 MiB
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
MIN_PART_MB = 5
CHECKSUM_MODES = ("when_required", "when_supported")
CHECKSUM_SETTINGS = ("request_checksum_calculation", "response_checksum_validation")
# botocore settings a user gives the standard AWS way: name (also the profile key) -> environment
# variable (https://docs.aws.amazon.com/sdkref/latest/guide/settings-reference.html).
AWS_SETTINGS = {
    "request_checksum_calculation": "AWS_REQUEST_CHECKSUM_CALCULATION",
    "response_checksum_validation": "AWS_RESPONSE_CHECKSUM_VALIDATION",
    "retry_mode": "AWS_RETRY_MODE",
    "max_attempts": "AWS_MAX_ATTEMPTS",
}
# paddlecd's values where neither storage.* nor the AWS environment or profile give one
FALLBACKS = {
    "request_checksum_calculation": "when_required",
    "response_checksum_validation": "when_required",
    "retry_mode": "standard",
    "max_attempts": 3,
}
ADDRESSING_STYLES = ("path", "virtual", "auto")
_AUTH_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "403",
    "Forbidden",
    # an empty 401 (an authenticating proxy in front of the store): botocore's code is the
    # status; a trial got "see the logs of the store" for it
    "401",
    "Unauthorized",
}
# A version is claimed by the object .claims/<name>/<version>.json, created with If-None-Match: *
# (S3 conditional writes:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
# S3 cannot tell a killed writer from a slow one: a claim older than this is taken over.
CLAIMS = ".claims"
CLAIM_STALE_AFTER_S = 24 * 3600
_CONFLICT_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


# What botocore raises for an answer it cannot read, besides its own errors (trial 12): a
# redirect loop (301/302/307 without a usable region: its S3 region redirector recurses until
# RecursionError) and a header it cannot parse (a Content-Length of "abc, 0": int() ValueError)
BROKEN_ANSWERS = (RecursionError, ValueError)


# The AWS variables of the credential chain that must not be set but empty (botocore takes an
# empty one as unset and goes on down the chain: "no AWS credentials found", naming none)
AWS_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


class S3Store:
    """An S3-compatible bucket (AWS, MinIO, Ceph RGW, BOS) under an optional key prefix.

    Args:
        bucket: bucket name.
        prefix: key prefix without leading/trailing ``/`` ("" for the bucket root).
        settings: endpoint URL, region, addressing style, checksum mode, multipart knobs.

    Raises:
        ConfigError: an unknown addressing style or checksum mode, or a part size under 5 MiB.
    """

    def __init__(self, bucket: str, prefix: str, settings: StorageSettings):
        self.bucket, self.prefix = bucket, prefix
        self.url = Location("s3", bucket, prefix).url
        for name in AWS_SECRETS:  # a trial: AWS_ACCESS_KEY_ID= read "no AWS credentials found"
            environ_value(name)  # (an unset GitHub secret expands to "")
        try:
            core = botocore.session.Session()  # AWS_PROFILE, AWS_CONFIG_FILE: the standard chain
            config = client_config(settings, profile=core.get_scoped_config())
            self.client = boto3.session.Session(botocore_session=core).client(
                "s3", endpoint_url=settings.endpoint_url, region_name=settings.region, config=config
            )
            self.client.meta.events.register("before-parse.s3.*", _mark_unreadable)
        except botocore.exceptions.ProfileNotFound as e:
            raise ConfigError(
                f"AWS profile not found: {e}",
                "fix AWS_PROFILE, or add the profile to ~/.aws/config",
            ) from e
        except ValueError as e:
            if "endpoint" in str(e).lower():  # botocore: "Invalid endpoint: minio:9000"
                raise ConfigError(
                    f"storage.endpoint_url {settings.endpoint_url!r} is not a URL ({e})",
                    "give the scheme too, e.g. http://minio:9000",
                ) from e
            raise _aws_setting_error(e) from e  # AWS_MAX_ATTEMPTS=abc: int("abc")
        except botocore.exceptions.BotoCoreError as e:  # AWS_RETRY_MODE=bogus, checksum modes
            raise _aws_setting_error(e) from e
        self.transfer = transfer_config(settings)
        self.met: dict[str, Quirk] = {}  # quirks calls met so far, by name

    # S3 object keys are at most 1024 bytes of UTF-8 (AWS S3 User Guide, "Naming Amazon S3
    # objects"); Ceph RGW answers a longer one with 400 InvalidObjectName
    MAX_KEY_BYTES = 1024

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def object_key(self, key: str) -> str:
        """The bucket's key of store key ``key`` (the store's prefix, then ``key``)."""
        return self._key(key)

    def _fail(self, e: Exception, action: str, key: str = "") -> StorageError:
        where = f"s3://{self.bucket}/{self._key(key)}" if key else f"s3://{self.bucket}"
        return storage_error(e, action=action, where=where, endpoint=self.client.meta.endpoint_url)

    def check(self) -> None:
        """HeadBucket: fail early when the bucket is missing or the credentials are refused."""
        try:
            answer = self.client.head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "opening") from e
        kind = (answer.get("ResponseMetadata", {}).get("HTTPHeaders") or {}).get("content-type")
        if str(kind or "").startswith("text/html"):  # a trial: a sign-in portal's 200 passed
            raise StorageError(f"opening {self.url}: the endpoint answered HeadBucket with a web "
                               "page (HTML), not S3", "something other than the store answered: "
                               "check storage.endpoint_url and any proxy in between "
                               "(HTTP(S)_PROXY)")

    def put_file(self, path: Path, key: str, *, progress: Progress | None = None) -> None:
        """Upload ``path``; multipart above the threshold with the configured part
        size/concurrency (boto3's transfer manager, as ``client.upload_file`` runs it).

        On Ctrl-C the multipart upload is aborted and KeyboardInterrupt raised at once: the
        manager's own shutdown waits for every part in flight, a held one up to botocore's read
        timeout times its attempts (a trial: 239 s, then a "read timeout" error, exit 8). The
        catch site then ends the process without waiting for those threads
        (:func:`paddlecd.cli.common.guarded`).

        Raises:
            StorageError: the store refused or failed the upload (named with ``key``).
        """
        manager = create_transfer_manager(self.client, self.transfer)
        interrupted, future = False, None  # a Ctrl-C may land before the transfer is made
        try:
            future = manager.upload(str(path), self.bucket, self._key(key), subscribers=(
                [ProgressCallbackInvoker(progress)] if progress else None))
            future.result()
        except KeyboardInterrupt:
            interrupted = True
            if future is not None:
                future.cancel()
            with contextlib.suppress(StorageError):  # the re-run aborts what is left anyway
                self.abort_uploads(key)
            raise
        except (BotoCoreError, ClientError, boto3.exceptions.Boto3Error,
                *BROKEN_ANSWERS) as e:
            raise self._fail(e, "uploading", key) from e
        finally:
            if not interrupted:
                manager.shutdown()

    def put_bytes(self, data: bytes, key: str, *, exclusive: bool = False) -> None:
        """PutObject of a small body (the manifest); with ``exclusive``, If-None-Match: * so an
        existing ``key`` is never replaced.

        Raises:
            ConflictError: ``exclusive`` and ``key`` exists (HTTP 412), or a concurrent conditional
                write to it won (HTTP 409).
            StorageError: any other failure.
        """
        extra = {"IfNoneMatch": "*"} if exclusive else {}
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(key),
                Body=data,
                ContentType="application/json",
                **extra,
            )
        except ClientError as e:
            if exclusive and _code(e) in _CONFLICT_CODES:
                raise ConflictError(
                    f"s3://{self.bucket}/{self._key(key)} was written by another upload",
                    "see which model it holds: invoke artifacts.list",
                ) from e
            raise self._fail(e, "writing", key) from e
        except (BotoCoreError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "writing", key) from e

    def get_file(self, key: str, dest: Path, *, progress: Progress | None = None) -> None:
        """Download ``key`` to ``dest`` (ranged GETs in parallel above the threshold).

        On Ctrl-C the transfer is cancelled and its threads are not waited for, as an upload's
        (a trial: with a body stalled, an interrupted download exited after 300 s, the read
        timeouts); the temp folder it wrote into is removed by the caller or the next run.
        """
        manager = create_transfer_manager(self.client, self.transfer)
        interrupted, future = False, None  # a Ctrl-C may land before the transfer is made
        try:
            future = manager.download(self.bucket, self._key(key), str(dest), subscribers=(
                [ProgressCallbackInvoker(progress)] if progress else None))
            future.result()
        except KeyboardInterrupt:
            interrupted = True
            if future is not None:
                future.cancel()
            raise
        except (BotoCoreError, ClientError, boto3.exceptions.Boto3Error,
                s3transfer.exceptions.RetriesExceededError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "downloading", key) from e  # (a trial: a body cut every time)
        finally:
            if not interrupted:
                manager.shutdown()

    def get_bytes(self, key: str) -> bytes | None:
        """The body of ``key``, or None when it does not exist."""
        got = self._get(key)
        return None if got is None else got[0]

    def _get(self, key: str) -> tuple[bytes, str] | None:
        """The body of ``key`` and its ETag (as the store quotes it), or None when it does not
        exist."""
        return self._read(key, lambda got: (got["Body"].read(), got.get("ETag", "")))

    def sha256(self, key: str) -> str | None:
        """hex sha256 of the bytes stored under ``key`` (one streamed GET, never the ETag:
        multipart ETags are no digest of the bytes), or None when it does not exist."""

        def hashed(got: Mapping[str, Any]) -> str:
            digest = hashlib.sha256()
            for chunk in got["Body"].iter_chunks(MIB):
                digest.update(chunk)
            return digest.hexdigest()

        return self._read(key, hashed)

    def _read(self, key: str, read: Callable[[Mapping[str, Any]], T]) -> T | None:
        """``read`` of the GetObject answer for ``key`` (its body read inside, so a connection
        lost mid-body is named too), or None when the key does not exist.

        Raises:
            StorageError: the store failed, named with ``key``.
        """
        try:
            return read(self.client.get_object(Bucket=self.bucket, Key=self._key(key)))
        except ClientError as e:
            if _code(e) in ("NoSuchKey", "404"):
                return None
            raise self._fail(e, "reading", key) from e
        except (BotoCoreError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "reading", key) from e

    def head(self, key: str) -> ObjectInfo | None:
        """Size of ``key``, or None when it does not exist."""
        try:
            return ObjectInfo(
                key,
                self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"],
            )
        except ClientError as e:
            if _code(e) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail(e, "reading", key) from e
        except (BotoCoreError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "reading", key) from e

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Objects whose key starts with ``prefix`` (ListObjectsV2, all pages), sorted by key."""
        strip = len(self._key(""))
        found: list[ObjectInfo] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix)
            ):
                self._check_listing(page, "Name", "listing", prefix)
                found += [ObjectInfo(o["Key"][strip:], o["Size"]) for o in page.get("Contents", [])]
        except (BotoCoreError, ClientError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "listing", prefix) from e
        return sorted(found, key=lambda o: o.key)

    def _check_listing(self, page: Mapping[str, Any], field: str, action: str,
                       prefix: str) -> None:
        """Refuse a 200 answer that is no S3 listing: every ListObjectsV2 (and
        ListMultipartUploads) result names its bucket (``Name``/``Bucket``, the S3 API
        reference); botocore reads an HTML page as a listing with nothing in it (a trial: a
        captive portal's sign-in page made "no model named 'linear'")."""
        if page.get(field):
            return
        headers = page.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        kind = headers.get("content-type", "no content type")
        raise StorageError(
            f"{action} {self.url}/{prefix}: the answer of {self.client.meta.endpoint_url} is no "
            "S3 listing "
            f"(HTTP 200, {kind[:80]}): something other than the store answered",
            "check storage.endpoint_url, and any proxy or portal in between (HTTP(S)_PROXY)")

    def delete(self, keys: Iterable[str]) -> None:
        """DeleteObject per key. Not DeleteObjects: that call must carry a checksum header, and
        older S3-compatible stores accept only Content-MD5, which botocore >= 1.36 no longer
        sends."""
        for key in keys:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
            except (BotoCoreError, ClientError, *BROKEN_ANSWERS) as e:
                raise self._fail(e, "deleting", key) from e

    def abort_uploads(self, prefix: str) -> list[str]:
        """Abort unfinished multipart uploads under ``prefix`` (left by a killed upload: invisible
        to ListObjects, yet stored and billed). Returns their keys, relative to the store."""
        strip, aborted = len(self._key("")), []
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix)
            )
            checked = (self._check_listing(p, "Bucket", "listing unfinished uploads under",
                                           prefix) or p for p in pages)
            for upload in (u for page in checked for u in page.get("Uploads", [])):
                try:
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                except ClientError as e:  # gone already (a lifecycle rule, another clean-up):
                    if e.response.get("Error", {}).get("Code") != "NoSuchUpload":  # what the
                        raise  # abort wants (a trial: it stopped the upload, exit 8)
                    continue
                aborted.append(upload["Key"][strip:])
        except (BotoCoreError, ClientError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "aborting unfinished uploads under", prefix) from e
        return aborted

    @contextlib.contextmanager
    def claim(self, prefix: str, *, take_over: bool = False) -> Iterator[None]:
        """Hold the exclusive right to write under ``prefix`` (``<name>/<version>/``): the claim
        object ``.claims/<name>/<version>.json`` is created with If-None-Match: * and read back
        (a store that ignores the header is caught by the id it returns), then deleted on exit.

        Args:
            take_over: replace a claim another upload left (``--overwrite``); claims older than
                :data:`CLAIM_STALE_AFTER_S`, and those of a process of this machine that no
                longer runs (:func:`_holder_gone`: a kill -9), are replaced without it. A claim
                whose process of this machine still runs is never replaced, not even with it.

        Raises:
            ConflictError: another upload holds the claim (its host, pid and start are named).
            StorageError: the store failed.
        """
        key = f"{CLAIMS}/{prefix.rstrip('/')}.json"
        me = {
            "id": uuid.uuid4().hex,
            "holder": f"{socket.gethostname()} pid {os.getpid()}",
            "started": time.time(),
            "pid": os.getpid(),
            "process": _process_space(),
        }
        self._take(key, me, prefix, take_over=take_over)
        try:
            yield
        except BaseException:
            # the upload's own failure is the one to name: a store that refused its deletes
            # refused the claim's too (a trial named only that); the next upload takes the
            # claim of this gone process over
            with contextlib.suppress(StorageError):
                self._release(key, me["id"])
            raise
        self._release(key, me["id"])

    def release_abandoned(self, prefix: str) -> bool:
        """Remove the claim of ``prefix`` that a process of this machine which no longer runs
        left (:func:`_holder_gone`: killed after its last write, so its re-run finds the model
        unchanged and writes nothing; a trial: the claim stayed for good). It is taken over as
        :meth:`claim` takes one (If-Match), then released: a live or foreign claim is kept.
        True when one was removed."""
        held = self._claim_of(f"{CLAIMS}/{prefix.rstrip('/')}.json")
        if held is None or not _holder_gone(held):
            return False
        return released_if_free(self, prefix)

    def _release(self, key: str, claim_id: str) -> None:
        if (self._claim_of(key) or {}).get("id") == claim_id:
            self.delete([key])

    def _take(self, key: str, me: dict, prefix: str, *, take_over: bool) -> None:
        body = json.dumps(me).encode()
        try:
            self.put_bytes(body, key, exclusive=True)
        except ConflictError:
            held = self._claim_of(key) or self._claim_again(key, body, prefix)
            if held is not None:
                self._take_over(key, body, held, prefix, take_over=take_over)
        mine = self._claim_of(key)
        if mine is None:  # a trial: a store that dropped the write was "claimed by another"
            raise StorageError(f"claiming {self.url}/{prefix}: the store took the claim and then "
                               "did not have it", "check the store (it drops writes) and any "
                               "proxy in between; then re-run")
        if mine.get("_foreign"):  # a trial: a proxy's page read back was "claimed by another"
            raise StorageError(f"claiming {self.url}/{prefix}: reading the claim back, the store "
                               f"answered no claim ({mine['_foreign']})",
                               "check the store and any proxy or portal in between; the re-run "
                               "takes this claim over")
        if mine.get("id") != me["id"]:
            raise ConflictError(
                f"{self.url}/{prefix} was claimed by another upload at the same time",
                "wait for it to finish, then re-run (the same model moves nothing)",
            )


    def _claim_again(self, key: str, body: bytes, prefix: str) -> dict | None:
        """A claim refused as existing (412) when none is there: the holder finished meanwhile,
        so it is tried once more. Returns the claim then found in the way (None: taken).

        Raises:
            StorageError: refused again with still none there (a trial: "being uploaded by
                another process (holder unknown since an unknown time)" for a store that
                answers conditional writes wrongly).
        """
        try:
            self.put_bytes(body, key, exclusive=True)
            return None
        except ConflictError:
            held = self._claim_of(key)
        if held is None:
            raise StorageError(f"claiming {self.url}/{prefix}: the store refused the claim as "
                               "existing (412 PreconditionFailed) but holds none",
                               "the store (or a proxy in front of it) answers conditional writes "
                               "wrongly: check it (If-None-Match: * on PutObject)")
        return held

    def _take_over(self, key: str, body: bytes, held: dict, prefix: str, *,
                   take_over: bool) -> None:
        """Replace the claim ``held`` when it is stale, its holder gone, or ``take_over``; else
        raise ConflictError naming its holder.

        Raises:
            ConflictError: it is live (or not stale and not asked to be taken over), or another
                upload took it over first. StorageError: it carries no ETag to replace it by.
        """
        if not held.get("_etag"):  # a trial: If-Match: "" was sent, "another upload" blamed
            raise StorageError(f"claiming {self.url}/{prefix}: the store's answer for the claim "
                               "carries no ETag, so it cannot be taken over safely",
                               "a proxy in front of the store strips headers: check it")
        started = _started(held)  # None: a claim whose start is no time (a trial: tracebacks)
        age = time.time() - started if started is not None else 0.0
        alive = _holder_state(held) is True  # --overwrite never takes a live one (a trial)
        if alive or not (take_over or age > CLAIM_STALE_AFTER_S or _holder_gone(held)):
            since = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
                     if started is not None else "an unknown time")
            holder = held.get("holder")
            holder = holder[:120] if isinstance(holder, str) else "holder unknown"
            raise ConflictError(
                f"{self.url}/{prefix} is being uploaded by another process "
                f"({holder} since {since})",
                "wait for it to finish (its process runs on this machine: not even "
                "--overwrite takes it over)" if alive else
                "wait for it to finish; a killed upload of this machine is taken over by the "
                "re-run itself, one of another machine by --overwrite once it is dead",
            ) from None
        self._replace(body, key, held.get("_etag", ""))  # a second taker loses here

    def _claim_of(self, key: str) -> dict | None:
        """The claim's JSON with its ETag under ``_etag``; None when there is none."""
        got = self._get(key)
        if got is None:
            return None
        raw, etag = got
        try:
            doc = json.loads(raw)
        except ValueError:
            return {"_etag": etag, "_foreign": f"{len(raw)} bytes that are no JSON"}
        return {**doc, "_etag": etag} if isinstance(doc, dict) else {"_etag": etag}

    def _replace(self, body: bytes, key: str, etag: str) -> None:
        """PutObject with If-Match: ``etag`` (S3 conditional writes, URL at :data:`CLAIMS`): of two
        takers of one stale claim, the second's ETag no longer matches. The quoted ETag (RFC 9110
        §8.8.3, as S3 returns it) first; on a 412 while the object still has that ETag, the store
        compares unquoted ETags (Ceph RGW 16, :mod:`.quirks`): again with the bare value. A store
        without conditional PUTs (501 NotImplemented) gets delete + If-None-Match: *.

        Raises:
            ConflictError: another upload replaced the claim first.
        """
        for i, tag in enumerate(dict.fromkeys((etag, known.unquoted(etag)))):
            try:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body,
                                       ContentType="application/json", IfMatch=tag)
                if i:
                    self.met[known.IF_MATCH_UNQUOTED] = known.if_match_unquoted()
                return
            except ClientError as e:
                if _code(e) == "NotImplemented":
                    self.delete([key])
                    self.put_bytes(body, key, exclusive=True)
                    return
                if _code(e) not in (*_CONFLICT_CODES, "NoSuchKey", "404"):  # 404: it went away
                    raise self._fail(e, "writing", key) from e
            except (BotoCoreError, *BROKEN_ANSWERS) as e:
                raise self._fail(e, "writing", key) from e
            if (self._claim_of(key) or {}).get("_etag") != etag:
                break  # replaced or released by another upload
        raise ConflictError(
            f"{self.url}/{key.removeprefix(CLAIMS + '/').removesuffix('.json')}/ was taken over "
            "by another upload at the same time",
            "wait for it to finish, then re-run (the same model moves nothing)",
        )

    def quirks(self) -> list[Quirk]:
        """How this store differs from AWS S3 (:mod:`.quirks`): the aws-chunked probe (an
        UploadPart to an upload id that cannot exist, so nothing is written: AWS answers 404
        NoSuchUpload, Ceph RGW over HTTPS 411) and what calls so far met. One request, no retry.

        Raises:
            StorageError: the probe could not reach the store.
        """
        found = dict(self.met)
        # the same endpoint, credentials and CA, trailers forced on, no retry
        client = boto3.session.Session(botocore_session=botocore.session.Session()).client(
            "s3", endpoint_url=self.client.meta.endpoint_url,
            region_name=self.client.meta.region_name,
            config=self.client.meta.config.merge(Config(
                request_checksum_calculation="when_supported",
                retries={"max_attempts": 1, "mode": "standard"})),
        )
        try:
            client.upload_part(Bucket=self.bucket, Key=self._key(".paddlecd-probe"),
                               UploadId="paddlecd-probe-no-such-upload", PartNumber=1, Body=b"p")
        except ClientError as e:
            if _code(e) == "MissingContentLength":
                mode = self.client.meta.config.request_checksum_calculation or "when_supported"
                found[known.AWS_CHUNKED] = known.aws_chunked_refused(mode)
        except (BotoCoreError, *BROKEN_ANSWERS) as e:
            raise self._fail(e, "probing") from e
        return list(found.values())


def client_config(
    settings: StorageSettings,
    *,
    profile: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """botocore client Config from ``settings``: addressing style, checksum behaviour, retries.

    ``checksum_mode`` sets both ``request_checksum_calculation`` and
    ``response_checksum_validation``.
    botocore 1.36 made them ``when_supported`` (CRC32 trailers on every upload), which several
    S3-compatible stores reject; ``when_required`` (our fallback) works on AWS and on those stores.

    Settings the user gives the standard AWS way win over paddlecd's fallbacks: a value
    is put in the Config (where it would beat the AWS environment and profile) only when
    ``storage.checksum_mode`` is set, or when :data:`AWS_SETTINGS` names neither an environment
    variable nor a profile key that is set.

    Args:
        profile: the AWS profile's settings (``botocore`` scoped config); None reads none.
        environ: the environment (default ``os.environ``).

    Raises:
        ConfigError: an unknown addressing style or checksum mode.
    """
    if settings.addressing_style not in ADDRESSING_STYLES:
        raise ConfigError(
            f"storage.addressing_style '{settings.addressing_style}' is not one of "
            f"{', '.join(ADDRESSING_STYLES)}",
            "path suits MinIO/Ceph; virtual suits AWS",
        )
    if settings.checksum_mode not in (None, *CHECKSUM_MODES):
        raise ConfigError(
            f"storage.checksum_mode '{settings.checksum_mode}' is not one of "
            f"{', '.join(CHECKSUM_MODES)}",
            "when_required works on AWS and older stores",
        )
    aws = aws_given(profile or {}, os.environ if environ is None else environ)
    checksums = {
        name: settings.checksum_mode or FALLBACKS[name]
        for name in CHECKSUM_SETTINGS
        if settings.checksum_mode or name not in aws
    }
    retries = {
        "mode" if name == "retry_mode" else name: FALLBACKS[name]
        for name in ("retry_mode", "max_attempts")
        if name not in aws
    }
    return Config(
        s3={"addressing_style": settings.addressing_style},
        retries=retries or None,
        connect_timeout=10,
        **checksums,
    )


def aws_given(profile: Mapping[str, Any], environ: Mapping[str, str]) -> set[str]:
    """Names of :data:`AWS_SETTINGS` the user set in the environment or the AWS profile."""
    return {name for name, env in AWS_SETTINGS.items() if environ.get(env) or name in profile}


def transfer_config(settings: StorageSettings) -> TransferConfig:
    """boto3 TransferConfig from the ``multipart_*`` settings (MiB) and ``max_concurrency``.

    Raises:
        ConfigError: a part size under S3's 5 MiB minimum, or a concurrency under 1.
    """
    if settings.multipart_chunk_mb < MIN_PART_MB or settings.multipart_threshold_mb < MIN_PART_MB:
        raise ConfigError(
            f"storage.multipart_chunk_mb/threshold_mb must be >= {MIN_PART_MB} "
            f"(got {settings.multipart_chunk_mb}/{settings.multipart_threshold_mb})",
            "S3 rejects parts under 5 MiB except the last",
        )
    if settings.max_concurrency < 1:
        raise ConfigError(
            f"storage.max_concurrency must be >= 1 (got {settings.max_concurrency})", "use 4"
        )
    return TransferConfig(
        multipart_threshold=settings.multipart_threshold_mb * MIB,
        multipart_chunksize=settings.multipart_chunk_mb * MIB,
        max_concurrency=settings.max_concurrency,
    )


# The header paddlecd adds to an answer botocore could not read as S3's XML (_mark_unreadable).
UNREADABLE = "x-paddlecd-unreadable"


def _mark_unreadable(response_dict: dict[str, Any], **_: Any) -> None:
    """``before-parse`` handler, after botocore's own: an answer botocore will report as a bare
    HTTP 5xx whose body is no S3 ``<Error>`` XML gets a header saying what it was. botocore turns
    a 200 whose body does not parse (an HTML page, an XML document cut short) into a 500
    (handlers._handle_200_error: "treat these cases as 500 Service Errors and try again"), and a
    trial's proxy page and cut-off listing were reported as "500 Internal Server Error", hint
    "see the logs of" a store that never said 500."""
    status, body = response_dict.get("status_code"), response_dict.get("body") or b""
    if not isinstance(status, int) or status < 500 or not isinstance(body, bytes):
        return
    try:
        if ElementTree.fromstring(body).tag == "Error":
            return  # S3's own error answer: botocore names its code
    except ElementTree.ParseError:
        pass
    headers = response_dict.get("headers") or {}
    kind = str(headers.get("content-type") or "no content type").split(";")[0][:60]
    size = headers.get("content-length")
    cut = f", {len(body)} of its {size} bytes" if str(size).isdigit() and int(size) != len(
        body) else f", {len(body)} bytes"
    what = "an empty answer" if not body else f"{kind}{cut}"
    with contextlib.suppress(TypeError, AttributeError):
        headers[UNREADABLE] = what


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _client_error(e: BaseException | None) -> BaseException | None:
    """The ClientError/BotoCoreError in boto3's wrappers (S3UploadFailedError has it as context)."""
    while e is not None and not isinstance(e, (ClientError, BotoCoreError)):
        # s3transfer's RetriesExceededError keeps the last attempt's error as last_exception
        e = getattr(e, "last_exception", None) or e.__cause__ or e.__context__
    return e


def _process_space() -> str:
    """Where a pid means one process: this boot of this machine (the kernel's boot id) and this
    PID namespace (its inode; containers on one host share the boot id, not the namespace)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""  # not Linux: no claim is judged by its pid


def _started(held: Mapping[str, Any]) -> float | None:
    """When claim ``held`` was taken (seconds since the epoch), or None when its ``started`` is
    no finite time between 1970 and a day from now (a claim another tool wrote, or damaged)."""
    value = held.get("started")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value <= time.time() + 86400 else None


def _holder_gone(held: Mapping[str, Any]) -> bool:
    """Whether claim ``held`` was taken by a process of this boot and PID namespace that no longer
    runs (``kill -9`` mid-upload: the re-run takes the claim over rather than waiting out its
    day). A claim without these fields, or from elsewhere, is never judged gone here."""
    return _holder_state(held) is False


def _holder_state(held: Mapping[str, Any]) -> bool | None:
    """True: claim ``held`` names a process of this boot and PID namespace that runs (refused even
    with ``take_over``: an ``--overwrite`` must not take over a live upload); False: one that no
    longer runs; None: a claim of another machine or namespace, or without these fields (nothing
    here can tell)."""
    pid, space = held.get("pid"), held.get("process")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or not space \
            or space != _process_space():  # (true is an int: os.kill(True) asked pid 1)
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _aws_setting_error(e: Exception) -> ConfigError:
    """botocore refusing a value of the AWS configuration (an ``AWS_*`` variable or a profile key,
    read while the client is made): one line naming the ones set, not its traceback."""
    named = sorted(k for k in os.environ if k.startswith("AWS_"))  # names only, never values
    return ConfigError(
        f"the AWS configuration is refused by botocore: {str(e).splitlines()[0]}",
        "fix the AWS_* variable or profile key it names"
        + (f" (set here: {', '.join(named)})" if named else " (in AWS_CONFIG_FILE's profile)"),
    )


def storage_error(e: Exception, *, action: str, where: str, endpoint: str) -> StorageError:
    """Translate a botocore/boto3 exception into one StorageError with a cause naming ``where``.

    Args:
        e: the exception raised by boto3 or botocore.
        action: what we were doing ("uploading", "opening", ...).
        where: ``s3://bucket[/key]``.
        endpoint: the endpoint URL, named when it cannot be reached.
    """
    root = _client_error(e) or e
    bucket = where.split("/")[2]
    if isinstance(root, RecursionError):
        return StorageError(f"{action} {where}: {endpoint} redirects the request in a loop "
                            "(HTTP 301/302/307)",
                            "check storage.endpoint_url and storage.region: the endpoint must be "
                            "the one of the bucket's region, and no proxy may redirect it")
    if isinstance(root, ValueError):
        return StorageError(f"{action} {where}: the answer of {endpoint} cannot be read "
                            f"({str(root).splitlines()[0][:120] if str(root) else 'ValueError'})",
                            "check the store and any proxy in between")
    if isinstance(root, NoCredentialsError):
        return StorageError(
            f"{action} {where}: no AWS credentials found",
            "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (the standard AWS chain)",
        )
    if isinstance(root, botocore.exceptions.ProxyConnectionError):  # a trial: "check the
        # store at …", which was fine; the proxy refused
        return StorageError(f"{action} {where}: {hide_userinfo(str(root).splitlines()[0])}",
                            "fix or unset HTTP_PROXY/HTTPS_PROXY, or add the store's host to "
                            "NO_PROXY")
    if isinstance(root, EndpointConnectionError):
        return StorageError(
            f"{action} {where}: cannot reach endpoint {endpoint}",
            "check storage.endpoint_url and that the store is running",
        )
    if isinstance(root, botocore.exceptions.ReadTimeoutError):  # its text names the URL "None"
        return StorageError(      # when the body stalls after the headers
            f"{action} {where}: {endpoint} stopped answering (read timeout)",
            "check the store's load and the network, then run the command again",
        )
    if isinstance(root, (botocore.exceptions.ConnectionClosedError,
                         botocore.exceptions.ResponseStreamingError,
                         botocore.exceptions.IncompleteReadError)):
        return StorageError(
            f"{action} {where}: the answer from {endpoint} broke off ({type(root).__name__})",
            "check the store and any proxy in between, then run the command again",
        )
    if isinstance(root, ClientError):
        code = _code(root)
        unreadable = root.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get(
            UNREADABLE)
        if unreadable:
            return StorageError(
                f"{action} {where}: the answer from {endpoint} is not S3's ({unreadable}): a "
                "proxy or load balancer answered, or the answer was cut short",
                "check the store and any proxy in between, then run the command again")
        if code == "NoSuchBucket" or (code in ("404", "NotFound") and where.count("/") == 2):
            return StorageError(
                f"{action} {where}: bucket '{bucket}' does not exist at {endpoint}",
                "create the bucket or fix storage.url / --to",
            )
        if code in _AUTH_CODES:
            return StorageError(
                f"{action} {where}: access denied ({code})",
                "check the credentials of the AWS chain (AWS_PROFILE, AWS_ACCESS_KEY_ID...) "
                "and the bucket policy",
            )
        message = root.response.get("Error", {}).get("Message")
        status = root.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 407 or code == "407":  # a trial: "see the logs of <store>" for a proxy's
            return StorageError(  # login (the store never saw the request)
                f"{action} {where}: HTTP 407 Proxy Authentication Required: the proxy between "
                "this machine and the store wants a login",
                "give the proxy's credentials in HTTP(S)_PROXY (http://user:password@proxy:port), "
                f"or add the store's host to NO_PROXY if {endpoint} needs no proxy")
        if code in ("PermanentRedirect", "AuthorizationHeaderMalformed", "301") or status == 301:
            # the bucket is in another region (S3 answers 301 PermanentRedirect with
            # x-amz-bucket-region; botocore follows it only when it can): a trial got "see the
            # logs" for it
            headers = root.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            region = headers.get("x-amz-bucket-region")
            named = region or "the bucket's region"
            return StorageError(
                f"{action} {where}: {known.describe(code, message, status)}"
                + (f" (the bucket is in {region})" if region else ""),
                f"set storage.region (PADDLECD_STORAGE_REGION) to {named}, or "
                "storage.endpoint_url to the endpoint of that region")
        return StorageError(
            f"{action} {where}: {known.describe(code, message, status)}",
            known.hint_for(code) or f"see the logs of {endpoint}",
        )
    return StorageError(
        f"{action} {where}: {str(root).splitlines()[0]}", f"check the store at {endpoint}"
    )
