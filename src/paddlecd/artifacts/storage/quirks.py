"""How S3-compatible stores differ from AWS S3, as measured, and the words paddlecd uses for it.

Measured on Ceph RGW 16.2.15 (Debian bookworm's ``radosgw``) with boto3/botocore 1.44.8, and
checked against moto 5.2.5 (which answers as AWS does):

- **aws-chunked refused**: over HTTPS botocore >= 1.36 with ``request_checksum_calculation =
  when_supported`` sends PutObject/UploadPart bodies as ``Content-Encoding: aws-chunked`` with a
  CRC trailer and no ``Content-Length``; RGW answers HTTP 411 ``MissingContentLength``.
  ``storage.checksum_mode: when_required`` sends plain bodies. :meth:`S3Store.quirks` finds it
  without writing: an UploadPart to an upload id that cannot exist (AWS: 404 NoSuchUpload).
- **If-Match unquoted**: RGW compares ``If-Match`` with the ETag without its quotes, so the quoted
  value every S3 answer carries (RFC 9110 §8.8.3 entity-tag) gets 412. The claim take-over sends
  the quoted form and, on a 412 whose object still has that ETag, the bare one.
- **empty multipart ETag**: RGW answers CompleteMultipartUpload with ``<ETag></ETag>``; HeadObject
  gives the real ``"<md5-of-md5s>-<parts>"``. paddlecd never reads the completion's ETag (integrity
  is the manifest's sha256).
- **no Message**: RGW's error bodies carry ``<Code>`` only (botocore then reports Message None);
  :func:`describe` gives the code's meaning from AWS's list of error codes
  (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html) and the HTTP status.
- ``x-amz-checksum-*`` values are accepted and ignored by RGW; ``If-None-Match: *`` is honoured.
"""

from __future__ import annotations

from http import HTTPStatus

from paddlecd.artifacts.storage.base import Quirk

CHECKSUM_HINT = ("set storage.checksum_mode: when_required (PADDLECD_STORAGE_CHECKSUM_MODE="
                 "when_required) to send plain bodies with a Content-Length")
AWS_CHUNKED = "aws-chunked-refused"
IF_MATCH_UNQUOTED = "if-match-unquoted"

# Meanings of codes stores send without a <Message>, from AWS's list (URL in the module docstring)
CODES = {
    "MissingContentLength": "the store needs a Content-Length; aws-chunked bodies have none",
    "PreconditionFailed": "a condition (If-Match / If-None-Match) did not hold",
    "NoSuchKey": "the key does not exist",
    "NoSuchUpload": "the multipart upload does not exist (aborted or completed)",
    "InvalidPart": "a part of the multipart upload is missing or its ETag differs",
    "EntityTooSmall": "a part other than the last is under 5 MiB",
    "InvalidBucketName": "the bucket name is not valid",
    "BucketAlreadyExists": "the bucket name is taken",
    "QuotaExceeded": "the user's or bucket's quota is used up",
    "SlowDown": "the store asks for fewer requests (throttling)",
    "NotImplemented": "the store does not implement a header or call that was sent",
    "InvalidRequest": "the store refused the request as malformed",
    "InternalError": "the store failed internally",
}


def describe(code: str, message: str | None, status: int | None) -> str:
    """``code`` and what it means: the store's message when it sent one, else the meaning from
    :data:`CODES`, and the HTTP status, e.g. ``MissingContentLength (HTTP 411 Length Required:
    the store needs a Content-Length ...)``. A bare numeric code (HEAD answers have no body) is
    named by its HTTP reason phrase."""
    if message:  # botocore gives None when the body has no <Message>
        return f"{code} {message}".strip()
    parts = []
    if status:
        try:
            parts.append(f"HTTP {status} {HTTPStatus(status).phrase}")
        except ValueError:
            parts.append(f"HTTP {status}")
    if code in CODES:
        parts.append(CODES[code])
    if code.isdigit() or not code:
        return ": ".join(parts) or "no error code"
    return f"{code} ({': '.join(parts)})" if parts else code


# S3's throttling answers (503 SlowDown; 429 TooManyRequests from MinIO and proxies): botocore's
# standard retry mode already retried them, so what is left is to wait
# (not a bare 503: a gateway's HTML page is no S3 answer, and no sign of throttling, trial 10)
THROTTLE_CODES = {"SlowDown", "TooManyRequests", "429", "RequestLimitExceeded",
                  "Throttling", "ThrottlingException"}
THROTTLE_HINT = ("the store is throttling requests: wait a minute and re-run the same command "
                 "(it resumes), or lower storage.max_concurrency")


def hint_for(code: str) -> str | None:
    """The hint a code calls for beyond "see the store's logs", or None (a trial: a SlowDown
    with a <Message> got "see the logs of <endpoint>")."""
    if code in THROTTLE_CODES:
        return THROTTLE_HINT
    if code in ("QuotaExceeded", "InsufficientStorage", "507"):  # a trial: "see the logs"
        return ("the store is out of space (its quota, or its disks): free space or raise the "
                "quota, then re-run (the upload completes what it left)")
    if code == "RequestTimeTooSkewed":  # SigV4 requests are valid 15 minutes around the
        # store's clock (AWS S3 API reference, error codes): a trial got "see the logs"
        return ("this machine's clock is off from the store's by more than 15 minutes: set it "
                "right (timedatectl set-ntp true, or chronyc makestep), then re-run")
    return CHECKSUM_HINT if code == "MissingContentLength" else None


def aws_chunked_refused(in_effect: str) -> Quirk:
    """The aws-chunked quirk, with a hint only when ``in_effect`` (the request checksum mode the
    client uses) makes uploads fail."""
    detail = "refuses aws-chunked uploads with checksum trailers over HTTPS (HTTP 411)"
    if in_effect == "when_supported":
        return Quirk(AWS_CHUNKED, detail + ": uploads will fail", CHECKSUM_HINT)
    return Quirk(AWS_CHUNKED, detail + f"; avoided: checksum mode {in_effect}")


def if_match_unquoted() -> Quirk:
    """The If-Match quirk (met during a claim take-over; worked around)."""
    return Quirk(IF_MATCH_UNQUOTED, "matches If-Match only against the unquoted ETag; "
                 "paddlecd retries with it")


def unquoted(etag: str) -> str:
    """``"abc"`` -> ``abc`` (also a weak ``W/"abc"``); an unquoted value unchanged."""
    return etag.removeprefix("W/").strip('"')
