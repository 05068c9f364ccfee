"""Object storage: one small interface, two stores (S3-compatible buckets, local folders).

Keys are relative to the store's root (``s3://bucket/prefix`` or ``file:///path``) and use ``/``
separators. The interface is :mod:`.base`; the stores are :mod:`.file` (the embedded default,
``file://<state>/artifacts``) and :mod:`.s3` (the only module importing boto3, loaded for ``s3://``
URLs only). This module parses store URLs and opens the right store.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from urllib.parse import urlparse

from paddlecd import files
from paddlecd.artifacts.storage.base import MIB, Location, ObjectInfo, Progress, Quirk, Store
from paddlecd.artifacts.storage.file import FileStore
from paddlecd.config import Settings, StorageSettings
from paddlecd.errors import ConfigError

__all__ = [
    "MIB",
    "FileStore",
    "Location",
    "ObjectInfo",
    "Progress",
    "Quirk",
    "Store",
    "default_store_url",
    "open_store",
    "parse_url",
    "split_model_url",
    "store_for",
]


def check_url_text(url: str) -> None:
    """Refuse a store URL urllib would silently change or that carries a secret: a control
    character (urllib drops tabs, CR and LF, WHATWG URL parsing, so ``file:///tmp/st\tore``
    was the store /tmp/store; others reached the server) and a ``user:password@`` (S3 takes its
    credentials from the AWS configuration; a trial printed the password in the error).

    Raises:
        ConfigError: naming the character, or the URL with its user and password hidden.
    """
    control = next((c for c in url if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise ConfigError(f"store URL '{files.hide_userinfo(url)[:200]}' holds the control "
                          f"character {control!r}",
                          "write the URL without it: a URL reader drops some of them, and the "
                          "store named would be another")
    if "@" in url.partition("://")[2].split("/", 1)[0]:
        raise ConfigError(f"store URL '{files.hide_userinfo(url)[:200]}' carries a user or "
                          "password before its bucket",
                          "drop them from the URL: S3 credentials come from AWS_ACCESS_KEY_ID/"
                          "AWS_SECRET_ACCESS_KEY or a profile (AWS_PROFILE)")


def parse_url(url: str) -> Location:
    """Parse ``s3://bucket[/prefix]`` or ``file:///abs/path``.

    Raises:
        ConfigError: another scheme, a query or fragment, a file URL's host, no bucket, an
            invalid bucket name, a relative file path, or a
            ``.``/``..`` segment (S3 keys are not normalised: ``s3://b/../x`` would write under
            the key ``../x/``), an empty S3 segment, or a file path in (or linked to) a system
            folder.
    """
    check_url_text(url)
    parsed = urlparse(url)
    for part, mark, text in (("a query", "?", parsed.query), ("a fragment", "#", parsed.fragment)):
        if mark in url:  # a trial: s3://bkt/p?versionId=1 went to s3://bkt/p, the rest unsaid
            raise ConfigError(f"store URL '{url}' has {part} ('{mark}{text}'): a store is "
                              "s3://BUCKET[/prefix] or file:///path",
                              "drop it; a version goes in the model's path: NAME/1.4.0")
    if {".", ".."} & set(parsed.path.split("/")):
        raise ConfigError(
            f"store URL '{url}' has a '.' or '..' segment",
            "write the prefix without them, e.g. s3://models/paddle",
        )
    if parsed.scheme == "file":
        if parsed.netloc:  # file://host/path: a host, not a relative path
            raise ConfigError(f"store URL '{url}': file URLs take no host ('{parsed.netloc}')",
                              f"write file://{os.path.abspath(parsed.netloc + parsed.path)} "
                              "for that folder on this machine (three slashes: an absolute "
                              "path), or s3:// for a server")  # trial 18: dropped the host
        if not parsed.path.startswith("/"):
            raise ConfigError(
                f"store URL '{url}': file URLs need an absolute path",
                "write file:///abs/path (three slashes)",
            )
        if "//" in parsed.path.rstrip("/"):  # as s3:// below: never collapsed without a word
            raise ConfigError(f"store URL '{url}' has an empty segment ('//')",
                              "write the path with single slashes, e.g. file:///srv/models")
        path = os.path.normpath(parsed.path)
        real = os.path.realpath(path)  # a symlink to /etc is /etc
        why = files.place_problem(path, writable=True)
        real_why = files.place_problem(real, writable=True)
        if why or real_why:
            raise ConfigError(f"store URL '{url}' {why}" if why else
                              f"store URL '{url}' resolves to {real}, which {real_why}",
                              "give the store a folder of its own, e.g. file:///srv/models")
        return Location("file", "", os.path.normpath(parsed.path))
    if parsed.scheme != "s3":
        raise ConfigError(
            f"store URL '{url}': scheme must be s3:// or file://",
            "e.g. s3://models/paddle or file:///srv/models",
        )
    if not parsed.netloc:
        raise ConfigError(
            f"store URL '{url}' has no bucket", "write s3://BUCKET or s3://BUCKET/PREFIX"
        )
    _check_bucket(parsed.netloc, url)
    prefix = parsed.path.strip("/")
    if "//" in parsed.path.rstrip("/"):  # S3 keeps "a//b" as it is: an unnamed folder (and
        # "s3://b//p" was an unnamed folder p: a trial got as far as the credentials)
        raise ConfigError(f"store URL '{url}' has an empty segment ('//')",
                          "write the prefix with single slashes, e.g. s3://models/paddle")
    return Location("s3", parsed.netloc, prefix)


def _check_bucket(bucket: str, url: str) -> None:
    # Bucket naming rules: 3-63 chars of a-z 0-9 . -, starting and ending with a letter or digit
    # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
    ok = 3 <= len(bucket) <= 63 and bucket[0].isalnum() and bucket[-1].isalnum()
    if not ok or any(not (c.islower() or c.isdigit() or c in ".-") for c in bucket):
        raise ConfigError(
            f"store URL '{url}': '{bucket}' is not a valid bucket name",
            "3-63 characters: lowercase letters, digits, '.' and '-'",
        )


def open_store(url: str, settings: StorageSettings) -> Store:
    """Open the store at ``url`` with the endpoint and transfer knobs of ``settings``.

    Raises:
        ConfigError: a bad URL or bad settings (addressing style, checksum mode, part size).
    """
    loc = parse_url(url)
    if loc.scheme == "file":
        return FileStore(Path(loc.prefix))
    from paddlecd.artifacts.storage.s3 import (
        S3Store,
    )  # boto3 is imported only when an s3:// store is used

    return S3Store(loc.bucket, loc.prefix, settings)


def default_store_url(settings: Settings) -> str:
    """``storage.url``, or the embedded default ``file://<state>/artifacts``."""
    return settings.storage.url or f"file://{settings.state / 'artifacts'}"


def store_for(settings: Settings, url: str | None = None) -> Store:
    """Open ``url`` (default :func:`default_store_url`) with the storage settings; ConfigError."""
    return open_store(url or default_store_url(settings), settings.storage)


def split_model_url(arg: str, settings: Settings, *, parts: int) -> tuple[str, list[str]]:
    """Split ``<store-url>/<name>[/<version>]`` (or a bare ``<name>[/<version>]`` on the configured
    store) into the store URL and its last ``parts`` segments.

    Raises:
        ConfigError: too few segments, or a bad store URL.
    """
    check_url_text(arg)
    tail = arg.partition("://")[2].lstrip("/") if "://" in arg else arg
    if "//" in tail.rstrip("/"):  # as parse_url: never collapsed
        raise ConfigError(f"'{arg[:200]}' has an empty segment ('//')",  # (a trial: the reads
                          "write it with single slashes, e.g. s3://models/paddle/<name>")  # did)
    base, rest = (default_store_url(settings), arg) if "://" not in arg else _split_full(arg, parts)
    segments = [s for s in rest.strip("/").split("/") if s]
    if len(segments) != parts:
        want = "<name>/<version>" if parts == 2 else "<name>"
        raise ConfigError(
            f"'{arg}' does not end in {want}", f"e.g. s3://models/paddle/{want} or {want}"
        )
    parse_url(base)
    return base, segments


def _split_full(arg: str, parts: int) -> tuple[str, str]:
    scheme, _, path = arg.partition("://")
    segments = path.rstrip("/").split("/")
    keep = len(segments) - parts
    if keep < 1 or (scheme == "file" and keep < 2):
        raise ConfigError(
            f"'{arg}' has no store part before the model", "e.g. s3://models/ocr-det/1.4.0"
        )
    return f"{scheme}://{'/'.join(segments[:keep])}", "/".join(segments[keep:])
