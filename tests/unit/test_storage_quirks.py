"""What S3-compatible stores do differently, in words (artifacts/storage/quirks.py): an error whose
body has no <Message> (Ceph RGW) is still named by its code, its meaning and its HTTP status; the
411 of an aws-chunked upload carries the checksum hint. The servers themselves are in
tests/integration/test_artifacts_storage_s3.py."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from paddlecd.artifacts.storage import quirks
from paddlecd.artifacts.storage.s3 import storage_error


def _error(code: str, status: int, message: str | None = None) -> ClientError:
    # the shape botocore parses from RGW's body <Error><Code>…</Code><BucketName>…</BucketName>
    error = {"Code": code, "Message": message, "BucketName": "models"}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "PutObject")


def test_a_code_without_message_is_named_with_its_meaning_and_status():
    e = storage_error(_error("MissingContentLength", 411), action="uploading",
                      where="s3://models/a/b", endpoint="https://rgw:8443")
    assert e.cause == ("uploading s3://models/a/b: MissingContentLength (HTTP 411 Length "
                       "Required: the store needs a Content-Length; aws-chunked bodies have none)")
    assert "None" not in e.cause
    assert e.hint.startswith("set storage.checksum_mode: when_required")


def test_a_message_the_store_sent_is_kept():
    e = storage_error(_error("SlowDown", 503, "Please reduce your request rate."),
                      action="uploading", where="s3://models/a", endpoint="http://s3")
    assert e.cause == "uploading s3://models/a: SlowDown Please reduce your request rate."
    # trial 9: a throttling answer with a message got "see the logs of http://s3"
    assert e.hint.startswith("the store is throttling requests: wait a minute")
    for code, status in (("TooManyRequests", 429), ("SlowDown", 503)):
        e = storage_error(_error(code, status, "slow down"), action="uploading",
                          where="s3://models/a", endpoint="http://s3")
        assert "throttling" in e.hint, (code, e.hint)
    for code, status in (("InternalError", 500), ("503", 503)):  # trial 10: a gateway's page
        e = storage_error(_error(code, status, None), action="uploading",
                          where="s3://models/a", endpoint="http://s3")
        assert e.hint == "see the logs of http://s3", (code, e.hint)


@pytest.mark.parametrize(("code", "status", "text"), [
    ("500", 500, "HTTP 500 Internal Server Error"),  # HEAD: no body, botocore uses the status
    ("QuotaExceeded", 403, "QuotaExceeded (HTTP 403 Forbidden: the user's or bucket's quota"),
    ("SomethingNew", 400, "SomethingNew (HTTP 400 Bad Request)"),
    ("SomethingNew", 599, "SomethingNew (HTTP 599)"),
])
def test_describe(code, status, text):
    assert quirks.describe(code, None, status).startswith(text)


def test_aws_chunked_quirk_has_a_hint_only_when_uploads_would_fail():
    assert quirks.aws_chunked_refused("when_supported").hint == quirks.CHECKSUM_HINT
    avoided = quirks.aws_chunked_refused("when_required")
    assert avoided.hint is None and "avoided" in avoided.detail


@pytest.mark.parametrize(("etag", "bare"), [('"abc"', "abc"), ("abc", "abc"),
                                            ('W/"abc-3"', "abc-3")])
def test_unquoted(etag, bare):
    assert quirks.unquoted(etag) == bare


def _stubbed_store():
    from botocore.stub import Stubber

    from paddlecd.artifacts.storage import open_store
    from paddlecd.config import StorageSettings

    store = open_store("s3://models/paddle",
                       StorageSettings(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    return store, Stubber(store.client)


def _claim_body(etag: str):
    import io

    from botocore.response import StreamingBody

    return {"Body": StreamingBody(io.BytesIO(b'{"id": "x"}'), 11), "ETag": etag}


def test_take_over_lost_to_another_taker_is_a_conflict(monkeypatch):
    """The quoted If-Match gets 412 and the claim's ETag changed meanwhile: another upload took
    it over first; no unquoted retry, no quirk recorded."""
    from paddlecd.artifacts.storage.base import ConflictError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    key = "paddle/.claims/m/1.json"
    stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412,
                          expected_params={"Bucket": "models", "Key": key, "Body": b"{}",
                                           "ContentType": "application/json", "IfMatch": '"a"'})
    stub.add_response("get_object", _claim_body('"b"'), {"Bucket": "models", "Key": key})
    with stub, pytest.raises(ConflictError, match="taken over by another upload"):
        store._replace(b"{}", ".claims/m/1.json", '"a"')
    stub.assert_no_pending_responses()
    assert store.met == {}


def test_take_over_on_a_store_without_conditional_puts_falls_back(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    key = "paddle/.claims/m/1.json"
    stub.add_client_error("put_object", "NotImplemented", http_status_code=501)
    stub.add_response("delete_object", {}, {"Bucket": "models", "Key": key})
    stub.add_response("put_object", {}, {"Bucket": "models", "Key": key, "Body": b"{}",
                                         "ContentType": "application/json", "IfNoneMatch": "*"})
    with stub:
        store._replace(b"{}", ".claims/m/1.json", '"a"')
    stub.assert_no_pending_responses()


def test_overwrite_never_takes_over_the_claim_of_a_live_upload(monkeypatch):
    """A trial (issue 21): --overwrite replaced the claim of an upload still running on this
    machine (a re-run refuses it). The holder's pid runs in this process space: refused, with
    or without take_over, and no write follows the refused create."""
    import io
    import json
    import os
    import time

    from botocore.response import StreamingBody

    from paddlecd.artifacts.storage import s3 as s3_store
    from paddlecd.artifacts.storage.base import ConflictError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    key = "paddle/.claims/m/1.0.0.json"
    live = json.dumps({"id": "x", "holder": f"here pid {os.getpid()}", "pid": os.getpid(),
                       "started": time.time(),
                       "process": s3_store._process_space()}).encode()
    for _ in range(2):
        stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
        stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(live), len(live)),
                                         "ETag": '"e"'}, {"Bucket": "models", "Key": key})
    with stub:
        for take_over in (False, True):
            with pytest.raises(ConflictError, match=rf"another process \(here pid {os.getpid()}"
                               ) as e, store.claim("m/1.0.0/", take_over=take_over):
                pass
            assert "not even --overwrite" in e.value.hint
    stub.assert_no_pending_responses()


def test_a_body_that_stalls_or_breaks_off_is_named_by_the_endpoint():
    """A third trial (a proxy announcing twice the body it sent): download said "Read timeout on
    endpoint URL: \\"None\\"", botocore's text for a stalled body read."""
    import botocore.exceptions as b

    stalled = storage_error(b.ReadTimeoutError(endpoint_url=None), action="reading",
                            where="s3://models/m/1.0.0/manifest.json", endpoint="http://s3:9000")
    assert stalled.cause == ("reading s3://models/m/1.0.0/manifest.json: http://s3:9000 stopped "
                             "answering (read timeout)")
    cut = storage_error(b.IncompleteReadError(actual_bytes=5, expected_bytes=10),
                        action="reading", where="s3://models/m", endpoint="http://s3:9000")
    assert cut.cause == ("reading s3://models/m: the answer from http://s3:9000 broke off "
                         "(IncompleteReadError)")
    assert "None" not in stalled.cause + cut.cause


@pytest.mark.parametrize("code", ["401", "Unauthorized"])
def test_a_401_of_an_authenticating_proxy_gets_the_credentials_hint(code):
    """Trial 7: an empty 401 (botocore's code is the status) got "see the logs of the store",
    where a 403 got the credentials hint."""
    e = storage_error(_error(code, 401), action="listing", where="s3://models/a",
                      endpoint="http://s3")
    assert e.cause == f"listing s3://models/a: access denied ({code})"
    assert e.hint.startswith("check the credentials of the AWS chain")


def test_a_proxy_that_refuses_is_named_not_the_store():
    """Trial 10: with HTTP_PROXY refusing, S3 tasks said "check the store at …", which was
    fine; the registry side names the proxy and NO_PROXY."""
    import botocore.exceptions as b

    e = storage_error(b.ProxyConnectionError(proxy_url="http://127.0.0.1:1", error="refused"),
                      action="listing", where="s3://models/a", endpoint="http://s3")
    assert "http://127.0.0.1:1" in e.cause and "NO_PROXY" in e.hint


def test_a_failed_upload_names_its_own_failure_not_the_claims_release(monkeypatch):
    """Trial 10: with every DELETE refused, ``upload --overwrite`` named the claim's clean-up
    delete, not the refused delete of the old files that stopped it. Without a failure inside,
    a refused release is still an error (the claim would stay)."""
    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, _ = _stubbed_store()
    held = {}
    monkeypatch.setattr(store, "_take", lambda key, me, prefix, take_over: held.update(me))
    monkeypatch.setattr(store, "_claim_of", lambda key: held)

    def refused(keys):
        raise StorageError(f"deleting {keys[0]}: access denied (AccessDenied)", "credentials")

    monkeypatch.setattr(store, "delete", refused)
    with pytest.raises(StorageError, match="deleting paddle/m/1.0.0/model.pdiparams"):
        with store.claim("m/1.0.0/"):
            refused(["paddle/m/1.0.0/model.pdiparams"])
    with pytest.raises(StorageError, match=r"deleting \.claims/m/1\.0\.0\.json"):
        with store.claim("m/1.0.0/"):
            pass


@pytest.mark.parametrize(("code", "status"), [("PermanentRedirect", 301), ("301", 301)])
def test_a_bucket_in_another_region_points_at_the_region_setting(code, status):
    """Trial 11: a 301 PermanentRedirect with ``x-amz-bucket-region: eu-west-1`` (list, show,
    download) or a bare 301 (upload's HeadBucket) was hinted "see the logs of <endpoint>"."""
    error = ClientError({"Error": {"Code": code, "Message": "must be addressed using the "
                                   "specified endpoint"},
                         "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {
                             "x-amz-bucket-region": "eu-west-1"}}}, "ListObjectsV2")
    e = storage_error(error, action="listing", where="s3://models/p", endpoint="http://s3")
    assert e.cause.endswith("(the bucket is in eu-west-1)")
    assert e.hint.startswith("set storage.region (PADDLECD_STORAGE_REGION) to eu-west-1")


def test_a_200_that_is_no_listing_is_refused_not_taken_for_an_empty_store(monkeypatch):
    """Trial 11: a captive portal's HTML page (200, text/html) on ListObjectsV2 made
    ``artifacts.list linear`` say "no model named 'linear'" (botocore parsed it as nothing)."""
    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    stub.add_response("list_objects_v2", {"ResponseMetadata": {
        "HTTPStatusCode": 200, "HTTPHeaders": {"content-type": "text/html"}}})
    stub.add_response("list_objects_v2", {"Name": "models", "KeyCount": 0})
    with stub:
        with pytest.raises(StorageError, match=r"is no S3 listing \(HTTP 200, text/html\)"):
            store.list("linear/")
        assert store.list("linear/") == []  # a real empty listing names its bucket


def test_a_download_whose_body_breaks_off_every_time_is_named_not_a_traceback(tmp_path,
                                                                              monkeypatch):
    """Trial 11: a GET cut after 100 bytes on every attempt ended in s3transfer's
    ``RetriesExceededError: Max Retries Exceeded`` traceback (exit 1)."""
    import botocore.exceptions as b
    import s3transfer.exceptions

    from paddlecd.artifacts.storage import s3 as s3_store
    from paddlecd.errors import StorageError

    class Cut:
        def result(self):
            raise s3transfer.exceptions.RetriesExceededError(
                b.IncompleteReadError(actual_bytes=100, expected_bytes=1_500_000))

    class Manager:
        def download(self, *a, **k):
            return Cut()

        def shutdown(self):
            pass

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, _ = _stubbed_store()
    monkeypatch.setattr(s3_store, "create_transfer_manager", lambda *a: Manager())
    with pytest.raises(StorageError, match="broke off") as e:
        store.get_file("linear/1.0.0/model.pdiparams", tmp_path / "x")
    assert "linear/1.0.0/model.pdiparams" in e.value.cause


def test_an_upload_past_s3s_key_length_is_refused_before_any_write(tmp_path, monkeypatch):
    """Trial 11: a 1200-byte prefix failed at the first PUT with RGW's InvalidObjectName (HTTP
    400) and the hint "see the logs". S3 keys are at most 1024 bytes."""
    from paddlecd.artifacts import transfer
    from paddlecd.artifacts.manifest import find_export
    from paddlecd.artifacts.storage import open_store
    from paddlecd.config import StorageSettings
    from paddlecd.errors import ConfigError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    for name in ("model.json", "model.pdiparams", "model.pdiparams.info"):
        (tmp_path / name).write_bytes(b"x")
    export = find_export(tmp_path)
    settings = StorageSettings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    long = open_store("s3://models/" + "p/" * 500, settings)
    with pytest.raises(ConfigError, match=r"would be 10\d\d bytes; S3 keys are at most 1024"):
        transfer._check_key_lengths(long, "m/1.0.0/", export)
    transfer._check_key_lengths(open_store("s3://models/p", settings), "m/1.0.0/", export)
    transfer._check_key_lengths(open_store(f"file://{tmp_path / 's'}", settings), "m/1.0.0/",
                                export)


def test_a_skewed_clock_is_hinted_as_the_clock():
    """Trial 11 (a note): RequestTimeTooSkewed got "see the logs of <endpoint>"."""
    e = storage_error(_error("RequestTimeTooSkewed", 403, "The difference between the request "
                             "time and the current time is too large."),
                      action="listing", where="s3://models/a", endpoint="http://s3")
    assert "clock" in e.hint and "15 minutes" in e.hint


@pytest.mark.parametrize("name", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"])
def test_an_aws_variable_set_but_empty_is_named(monkeypatch, name):
    """Trial 11 (a note): ``AWS_ACCESS_KEY_ID=`` (an unset CI secret) read "no AWS credentials
    found", naming nothing."""
    from paddlecd.errors import ConfigError

    monkeypatch.setenv(name, "")
    with pytest.raises(ConfigError, match=rf"\${name} is set but empty"):
        _stubbed_store()


@pytest.mark.parametrize("started", ['"abc"', "null", "1e400", "true"])
def test_a_claim_whose_start_is_no_time_is_named_not_a_traceback(monkeypatch, started):
    """Trial 12: a claim ``{"started": "abc"}`` (or null, or 1e400) ended in a ValueError,
    TypeError or OverflowError traceback, with and without --overwrite."""
    import io

    from botocore.response import StreamingBody

    from paddlecd.artifacts.storage.base import ConflictError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    body = f'{{"started": {started}, "holder": "x", "pid": true}}'.encode()
    stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
    stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body)),
                                     "ETag": '"e"'})
    with stub:
        with pytest.raises(ConflictError, match=r"another process \(x since an unknown time\)"):
            with store.claim("m/1.0.0/"):
                pass


def test_a_claim_read_back_that_is_no_claim_is_named_not_another_upload(monkeypatch):
    """Trial 12: the claim read back as a login page (200 text/html) was "claimed by another
    upload at the same time"; nobody else had claimed it."""
    import io

    from botocore.response import StreamingBody

    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    page = b"<html>Sign in</html>"
    stub.add_response("put_object", {"ETag": '"a"'})
    stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(page), len(page)),
                                     "ETag": '"a"'})
    with stub:
        with pytest.raises(StorageError, match="reading the claim back, the store answered no "
                                               "claim"):
            with store.claim("m/1.0.0/"):
                pass


@pytest.mark.parametrize(("raised", "words"), [
    (RecursionError("maximum recursion depth exceeded"), "redirects the request in a loop"),
    (ValueError("invalid literal for int() with base 10: 'abc, 0'"), "cannot be read"),
])
def test_an_answer_botocore_cannot_read_is_named_not_a_traceback(monkeypatch, raised, words):
    """Trial 12: HEAD of the bucket answered 301 without a region, 302 to itself or 307 to a
    closed port ended in botocore's RecursionError (its region redirector); a HEAD with
    ``Content-Length: abc`` in a ValueError. Both were tracebacks."""
    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, _ = _stubbed_store()

    def broken(**kw):
        raise raised

    monkeypatch.setattr(store.client, "head_bucket", broken)
    monkeypatch.setattr(store.client, "head_object", broken)
    with pytest.raises(StorageError, match=words):
        store.check()
    with pytest.raises(StorageError, match=words):
        store.head("m/1.0.0/manifest.json")


@pytest.mark.parametrize(("code", "status"), [("QuotaExceeded", 403), ("InsufficientStorage", 507)])
def test_a_full_store_is_hinted_as_full(code, status):
    """Trial 12: a 507 InsufficientStorage and RGW's 403 QuotaExceeded got "see the logs"."""
    e = storage_error(_error(code, status), action="uploading", where="s3://models/a",
                      endpoint="http://s3")
    assert e.hint.startswith("the store is out of space")


def test_an_unfinished_upload_already_gone_counts_as_aborted(monkeypatch):
    """Trial 13: an unfinished multipart upload listed, then gone before its abort (a lifecycle
    rule, another clean-up): NoSuchUpload stopped the upload, exit 8; it is what the abort
    wants. Another error still fails."""
    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    listing = {"Bucket": "models", "Uploads": [
        {"Key": "paddle/m/1.0.0/a.bin", "UploadId": "u1"},
        {"Key": "paddle/m/1.0.0/b.bin", "UploadId": "u2"}]}
    stub.add_response("list_multipart_uploads", listing,
                      {"Bucket": "models", "Prefix": "paddle/m/1.0.0/"})
    stub.add_client_error("abort_multipart_upload", "NoSuchUpload", http_status_code=404)
    stub.add_response("abort_multipart_upload", {})
    with stub:
        assert store.abort_uploads("m/1.0.0/") == ["m/1.0.0/b.bin"]
    stub.add_response("list_multipart_uploads", listing,
                      {"Bucket": "models", "Prefix": "paddle/m/1.0.0/"})
    stub.add_client_error("abort_multipart_upload", "AccessDenied", http_status_code=403)
    with stub, pytest.raises(StorageError):
        store.abort_uploads("m/1.0.0/")


def test_a_412_claim_with_no_claim_there_is_tried_again_then_named(monkeypatch):
    """Trial 13: the claim PUT answered 412 with no claim object there said "being uploaded by
    another process (holder unknown since an unknown time)". It is tried once more (the holder
    may have just finished); refused again with none there, the store is named."""
    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    for _ in range(2):
        stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
        stub.add_client_error("get_object", "NoSuchKey", http_status_code=404)
    with stub, pytest.raises(StorageError) as e:
        with store.claim("m/1.0.0/"):
            pass
    assert "refused the claim as existing (412 PreconditionFailed) but holds none" in e.value.cause
    stub.assert_no_pending_responses()


def test_a_claim_read_without_its_etag_is_not_taken_over(monkeypatch):
    """Trial 13: a stale claim whose GET came back without an ETag (a proxy stripping headers)
    was taken over with If-Match: "" and the 412 blamed "another upload at the same time"."""
    import io

    from botocore.response import StreamingBody

    from paddlecd.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store, stub = _stubbed_store()
    body = b'{"started": 0, "holder": "gone", "pid": 1, "id": "old"}'
    stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
    stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))})
    with stub, pytest.raises(StorageError) as e:
        with store.claim("m/1.0.0/", take_over=True):
            pass
    assert "carries no ETag, so it cannot be taken over safely" in e.value.cause


def test_a_proxy_that_wants_a_login_is_named_not_the_store():
    """Trial 13: HTTP 407 from the HTTP(S)_PROXY got "see the logs of <store>"."""
    e = storage_error(_error("407", 407, "Proxy Authentication Required"),
                      action="listing", where="s3://models/a", endpoint="http://s3")
    assert "Proxy Authentication Required" in e.cause and "HTTP(S)_PROXY" in e.hint
    assert "logs" not in e.hint


NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 "
             b"Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


@pytest.mark.parametrize(("body", "length", "what"), [
    (NGINX_502, None, f"text/html, {len(NGINX_502)} bytes"),  # <hr>: no XML, as nginx's
    (b"<?xml version='1.0'?><ListBucketResult><Name>models</Na", 400,
     "application/xml, 55 of its 400 bytes"),
    (b"", 0, "an empty answer")])
def test_a_200_botocore_cannot_read_is_named_not_a_500(monkeypatch, body, length, what):
    """Trial 17: a ListObjects answered 200 with an HTML page, or with its XML cut short, was
    "500 Internal Server Error", hint "see the logs of" the store: botocore turns a 200 it
    cannot parse into a 500 (handlers._handle_200_error). A real HTTP server answers here, as a
    proxy would, so botocore's own handlers run."""
    import http.server
    import threading

    from paddlecd.artifacts.storage import open_store
    from paddlecd.config import StorageSettings
    from paddlecd.errors import StorageError

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            kind = "text/html" if body.startswith(b"<html") else "application/xml"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    try:
        store = open_store("s3://models/paddle", StorageSettings(
            endpoint_url=f"http://127.0.0.1:{server.server_address[1]}", region="us-east-1"))
        with pytest.raises(StorageError) as e:
            store.list("m1/")
    finally:
        server.shutdown()
    assert "500" not in e.value.cause, e.value.cause
    # (a one-attempt client sees the 200 page itself: "is no S3 listing (HTTP 200, text/html)")
    assert f"is not S3's ({what})" in e.value.cause or "is no S3 listing" in e.value.cause, \
        e.value.cause
    assert "see the logs" not in e.value.hint
