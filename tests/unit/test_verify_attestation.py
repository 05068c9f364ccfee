"""Attestations without a registry: the Statement, DSSE signing and checking, the rule, keys."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.signer import CryptoSigner

from paddlecd import config
from paddlecd.errors import (
    AttestedFailureError,
    NoAttestationError,
    SignatureError,
    SigningKeyError,
    SubjectError,
)
from paddlecd.signing import keys
from paddlecd.verify import attestation
from paddlecd.verify.evidence import REQUIRED_CHECKS

DIGEST = "sha256:" + "ab" * 32


def _iso(hours_ago: float = 0) -> str:
    when = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours_ago)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _record(digest=DIGEST, *, passed=True, hours_ago=0.0, modules=REQUIRED_CHECKS, variant="cpu"):
    return {
        "digest": digest,
        "reference": f"127.0.0.1:5000/ci/paddle@{digest}",
        "variant": variant,
        "passed": passed,
        "created": _iso(hours_ago),
        "junit": "/local/junit.xml",
        "model_dir": None,
        "checks": [
            {"name": f"{m}/t", "passed": passed or m != "allreduce", "metrics": {"busbw": 1.5}}
            for m in modules
        ],
    }


@pytest.fixture
def pair(tmp_path):
    private, public = keys.keygen(tmp_path / "keys")
    settings = config.load(
        {"verify.signing_key": str(private), "release.trusted_keys": str(public)},
        root=tmp_path,
        environ={},
    )
    return keys.signer(settings), keys.trusted(settings)


def test_statement_is_in_toto_v1_about_the_digest():
    st = attestation.statement(_record(), junit=b"<x/>", log=b"log")
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["subject"] == [{"name": "127.0.0.1:5000/ci/paddle", "digest": {"sha256": "ab" * 32}}]
    assert st["predicateType"] == attestation.PREDICATE_TYPE
    predicate = st["predicate"]
    assert "junit" not in predicate and "model_dir" not in predicate  # local paths are not signed
    assert predicate["byproducts"]["smoke.log"]["size"] == 3 and predicate["host"]["hostname"]
    assert predicate["checks"][0]["metrics"] == {"busbw": 1.5}


def test_evidence_with_to_json_is_accepted():
    class Record:
        def to_json(self):
            return json.dumps(_record()).encode()

    assert (
        attestation.statement(Record(), junit=b"", log=b"")["subject"][0]["digest"]["sha256"]
        == "ab" * 32
    )


def test_sign_and_verify_round_trip(pair):
    signer, trusted = pair
    att = attestation.sign(_record(), signer, junit=b"", log=b"")
    assert json.loads(att.envelope)["payloadType"] == "application/vnd.in-toto+json"
    verified = attestation.verify(attestation.Attestation.from_json(att.to_json()), trusted, DIGEST)
    assert (
        verified.passed
        and verified.keyid == trusted[0].keyid
        and verified.key_source == trusted[0].source
    )
    assert attestation.VerifiedAttestation.from_json(verified.to_json()) == verified


def test_changed_byte_untrusted_key_other_subject(pair):
    signer, trusted = pair
    doc = json.loads(attestation.sign(_record(), signer, junit=b"", log=b"").envelope)
    doc["payload"] = base64.b64encode(
        base64.b64decode(doc["payload"]).replace(b"1.5", b"9.5")
    ).decode()
    with pytest.raises(SignatureError, match="does not verify"):
        attestation.verify(
            attestation.Attestation.from_json(json.dumps(doc).encode()), trusted, DIGEST
        )
    other_key = attestation.sign(_record(), CryptoSigner.generate_ecdsa(), junit=b"", log=b"")
    with pytest.raises(SignatureError, match="not in release.trusted_keys"):
        attestation.verify(other_key, trusted, DIGEST)
    with pytest.raises(SubjectError, match=f"is about {DIGEST}, not sha256:cd"):
        attestation.verify(
            attestation.sign(_record(), signer, junit=b"", log=b""), trusted, "sha256:" + "cd" * 32
        )
    with pytest.raises(SignatureError, match="no DSSE envelope"):
        attestation.Attestation.from_json(
            b'{"payload": "!!", "payloadType": "x", "signatures": []}'
        )


def _verified(pair, **kw):
    signer, trusted = pair
    return attestation.verify(
        attestation.sign(_record(**kw), signer, junit=b"", log=b""), trusted, DIGEST
    )


def test_the_newest_run_decides(pair):
    older_pass, newer_fail = (
        _verified(pair, hours_ago=2),
        _verified(pair, passed=False, hours_ago=1),
    )
    with pytest.raises(
        AttestedFailureError, match="a newer run .* failed after the passing run .*: allreduce/t"
    ):
        attestation.choose(
            [older_pass, newer_fail], digest=DIGEST, variant="cpu", max_age_hours=168
        )
    newest = _verified(pair)
    chosen = attestation.choose(
        [older_pass, newer_fail, newest], digest=DIGEST, variant="cpu", max_age_hours=168
    )
    assert chosen == newest


@pytest.mark.parametrize(
    "kw, error, words",
    [
        ({"hours_ago": 200}, AttestedFailureError, "is stale: 200"),
        (
            {"modules": ("environment", "allreduce")},
            AttestedFailureError,
            "lacks the convergence, export checks",
        ),
        ({"variant": "cu126"}, SubjectError, "of variant 'cu126', not 'cpu'"),
        ({"passed": False}, AttestedFailureError, r"the attested run \(.*\) failed: allreduce/t"),
    ],
)
def test_promotion_rule_refusals(pair, kw, error, words):
    with pytest.raises(error, match=words) as info:
        attestation.choose([_verified(pair, **kw)], digest=DIGEST, variant="cpu", max_age_hours=168)
    assert info.value.exit_code == 7 and info.value.hint


def test_no_run_at_all():
    with pytest.raises(NoAttestationError, match=f"no attestation of {DIGEST}"):
        attestation.choose([], digest=DIGEST, variant="cpu", max_age_hours=1)


def _settings(tmp_path, **flags):
    return config.load(flags, root=tmp_path, environ={})


def test_signing_key_problems(tmp_path, monkeypatch):
    monkeypatch.delenv(keys.ENV_PEM, raising=False)
    with pytest.raises(SigningKeyError, match="no signing key configured"):
        keys.signer(_settings(tmp_path))
    with pytest.raises(SigningKeyError, match="does not exist"):
        keys.signer(_settings(tmp_path, **{"verify.signing_key": "nope.key"}))
    (tmp_path / "folder.key").mkdir()
    with pytest.raises(SigningKeyError, match="folder.key is a folder, not a regular file") as e:
        keys.signer(_settings(tmp_path, **{"verify.signing_key": "folder.key"}))
    assert e.value.hint == f"name the key file itself, e.g. {tmp_path}/folder.key/<name>.key"
    # trial 18: a folder the key is in (artifacts.signing_key: keys/) was told to "put the key
    # itself there, or remove what is there"; the hint names the key file in it
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "models.key").write_text("x")
    (tmp_path / "keys" / "models.pub").write_text("x")
    with pytest.raises(SigningKeyError) as e:
        keys.load_signer(tmp_path / "keys", "artifacts.signing_key")
    assert e.value.cause == f"signing key (artifacts.signing_key) {tmp_path}/keys is a folder, " \
        "not a regular file"
    assert e.value.hint == f"name the key file itself, e.g. {tmp_path}/keys/models.key"
    p384 = ec.generate_private_key(ec.SECP384R1())
    (tmp_path / "p384.key").write_bytes(
        p384.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(SigningKeyError, match="EC secp384r1 key, not ECDSA P-256"):
        keys.signer(_settings(tmp_path, **{"verify.signing_key": "p384.key"}))
    encrypted = p384.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    monkeypatch.setenv(keys.ENV_PEM, encrypted.decode())
    with pytest.raises(
        SigningKeyError, match=r"\$PADDLECD_SIGNING_KEY is not an unencrypted PEM private key"
    ):
        keys.signer(_settings(tmp_path))


def test_a_path_in_the_signing_key_variable_is_named_as_a_path(tmp_path, monkeypatch):
    """Trial 16: ``PADDLECD_SIGNING_KEY=<a .pub file>`` (or a folder) said "holds no PEM block":
    the variable holds the PEM itself, and a path there is said to be one."""
    private, public = keys.keygen(tmp_path / "k")
    folder = Path(public).parent
    for given, what in ((public, ""), (folder, ", a folder")):
        monkeypatch.setenv(keys.ENV_PEM, str(given))
        with pytest.raises(SigningKeyError) as e:
            keys.signer(_settings(tmp_path))
        assert e.value.cause == f"$PADDLECD_SIGNING_KEY holds a path ({given}{what}), not the " \
            "PEM key itself"
        assert "verify.signing_key" in e.value.hint
        # trial 17: a folder's hint said export PADDLECD_SIGNING_KEY="$(cat <the folder>)"
        assert ("$(cat " in e.value.hint) is (what == "")
    monkeypatch.setenv(keys.ENV_PEM, Path(private).read_text())
    assert keys.signer(_settings(tmp_path))


def test_trusted_key_problems(tmp_path):
    private, public = keys.keygen(tmp_path / "k")
    with pytest.raises(SigningKeyError, match="no trusted keys configured"):
        keys.trusted(_settings(tmp_path))
    with pytest.raises(SigningKeyError, match="is not a PEM public key"):
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": str(private)}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SigningKeyError, match="holds no"):
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": "empty"}))
    both = keys.trusted(_settings(tmp_path, **{"release.trusted_keys": f"k, {public}"}))
    assert [k.source for k in both] == [str(public)]  # the folder and its file: one key, once


@pytest.mark.parametrize(
    "content, why, hint",
    [
        (lambda pub, key: b"hello\n", "it holds no PEM block", "list the .pub file"),
        (lambda pub, key: pub[:70] + b"\n-----END PUBLIC KEY-----\n",
         "its PUBLIC KEY block does not decode", "list the .pub file"),
        (lambda pub, key: key, "it holds a PRIVATE KEY", "never private ones"),
    ],
)
def test_a_broken_trusted_key_is_named_in_our_words(tmp_path, content, why, hint):
    """A trial: a garbage public key printed the library's text cut mid-word, with a hint about
    private keys whatever the file held."""
    private, public = keys.keygen(tmp_path / "k")
    bad = tmp_path / "bad.pub"
    bad.write_bytes(content(public.read_bytes(), private.read_bytes()))
    with pytest.raises(SigningKeyError) as e:
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": str(bad)}))
    assert e.value.cause.startswith(f"trusted key {bad} is not a PEM public key: {why}")
    assert hint in e.value.hint


def test_a_trusted_keys_folder_without_a_pub_names_itself_and_how_to_add_one(tmp_path):
    """The workflows' default (.github/attestation-keys) holds only its README until a key is
    committed: one line naming the folder, a hint naming keygen and the README (issue 10)."""
    folder = tmp_path / ".github" / "attestation-keys"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("how to add a key\n")
    (folder / "paddlecd-signing.key").write_text("a private key is never trusted\n")
    with pytest.raises(SigningKeyError) as e:
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": ".github/attestation-keys"}))
    assert e.value.cause == (
        "trusted-keys folder .github/attestation-keys (release.trusted_keys) holds no *.pub "
        "public key"
    )
    assert "\n" not in e.value.cause + e.value.hint
    assert "invoke evidence.keygen --out" in e.value.hint
    assert ".github/attestation-keys/README.md" in e.value.hint


def test_keygen_never_overwrites_and_keeps_the_private_key_private(tmp_path):
    private, public = keys.keygen(tmp_path)
    assert private.stat().st_mode & 0o777 == 0o600 and b"PUBLIC KEY" in public.read_bytes()
    with pytest.raises(SigningKeyError, match="exists already"):
        keys.keygen(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [keys.PRIVATE_NAME, keys.PUBLIC_NAME]


def test_a_keygen_killed_between_its_two_files_is_completed_by_the_next(tmp_path):
    """Trial 4: keygen killed after its private key left it alone, and every re-run refused it
    ("exists already; keys are never overwritten") though there was no pair. The re-run writes
    the public key of that private key; a temp file of a kill before the link is swept."""
    private, public = keys.keygen(tmp_path / "k")
    want = public.read_bytes()
    public.unlink()
    (tmp_path / "k" / ".keygen-abc.tmp").write_bytes(b"half a key")
    notes = []
    assert keys.keygen(tmp_path / "k", note=notes.append) == (private, public)
    assert public.read_bytes() == want and notes == [
        f"{private} had no public key (an interrupted keygen): wrote its {keys.PUBLIC_NAME}"]
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [keys.PRIVATE_NAME,
                                                                   keys.PUBLIC_NAME]
    private.unlink()  # a lone public key is not completed: its private key is gone
    with pytest.raises(SigningKeyError, match="a public key without its private key"):
        keys.keygen(tmp_path / "k")
    public.unlink()
    private.write_bytes(b"not a key")
    with pytest.raises(SigningKeyError, match="no .* beside it.*not an unencrypted PEM") as e:
        keys.keygen(tmp_path / "k")
    # trial 19: the hint was "create a pair with: invoke evidence.keygen --out <folder>"
    assert e.value.hint == ("keygen never overwrites a key: use another --out folder, or "
                            f"remove {private} on purpose")
    assert private.read_bytes() == b"not a key"


def test_the_pem_secret_is_no_setting(tmp_path):
    settings = config.load(
        root=tmp_path,
        environ={
            "PADDLECD_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----",
            "PADDLECD_VERIFY_SIGNING_KEY": "a.key",
            "PADDLECD_RELEASE_TRUSTED_KEYS": "keys/",
        },
    )
    assert settings.verify.signing_key == "a.key" and settings.release.trusted_keys == "keys/"
    assert "BEGIN" not in repr(settings)


def _on_nodes(pair, nodes: int, **kw):
    signer, trusted = pair
    record = {**_record(**kw, modules=("allreduce", "convergence")),
              "nodes": [{"hostname": f"n{i}", "rank": i} for i in range(nodes)]}
    return attestation.verify(attestation.sign(record, signer, junit=b"", log=b""), trusted, DIGEST)


def test_require_nodes_needs_a_passing_multi_node_run(pair):
    one_node = _verified(pair, hours_ago=3)
    rule = {"digest": DIGEST, "variant": "cpu", "max_age_hours": 168}
    with pytest.raises(AttestedFailureError, match="require_nodes=2: no attested multi-node run"):
        attestation.choose([one_node], require_nodes=2, **rule)
    two = _on_nodes(pair, 2, hours_ago=1)
    # the multi-node run holds only the collective checks: the one-node run still decides
    assert attestation.choose([one_node, two], require_nodes=2, **rule) == one_node
    with pytest.raises(AttestedFailureError, match="spans 2 nodes"):
        attestation.choose([one_node, two], require_nodes=4, **rule)
    failed = _on_nodes(pair, 2, passed=False)
    with pytest.raises(AttestedFailureError, match=r"newest 2-node run \(.*\) failed"):
        attestation.choose([one_node, two, failed], **rule)  # even at require_nodes=1


def test_describe_says_skipped_checks_apart_from_passed_ones():
    """evidence.show printed ``10/10 passed`` for a CPU run whose 2 GPU checks were skipped
    (the trial's demo); a skipped check still counts towards the pass (evidence.Check)."""
    from paddlecd.verify import registry_store
    from paddlecd.verify.attestation import VerifiedAttestation
    from paddlecd.verify.describe import describe

    checks = [{"name": f"environment/t{i}", "passed": True, "skipped": i < 2} for i in range(10)]
    run = registry_store.Run(
        manifest="sha256:" + "a" * 64,
        verified=VerifiedAttestation(
            digest="sha256:" + "b" * 64, name="r/p", keyid="k" * 16, key_source="k.pub",
            predicate={"passed": True, "checks": checks, "created": "2026-12-01T00:00:00Z"},
        ),
    )
    lines = describe(run)
    assert "  checks:   8/10 passed, 2 skipped" in lines, lines


def test_the_state_folders_own_pair_is_the_embedded_default(tmp_path, monkeypatch):
    """evidence.keygen's default folder: signed with and trusted while nothing is configured, so
    the commands after README command 1 need no exports; a configured key always wins."""
    monkeypatch.delenv(keys.ENV_PEM, raising=False)
    s = _settings(tmp_path)
    assert not keys.configured(s)
    private, public = keys.keygen(keys.state_pair(s)[0].parent)
    assert keys.configured(s) and keys.signer(s).public_key == keys.trusted(s)[0].key
    assert [k.source for k in keys.trusted(s)] == [str(public)]
    other_private, other_public = keys.keygen(tmp_path / "committed")
    configured = _settings(tmp_path, **{"release.trusted_keys": str(other_public),
                                        "verify.signing_key": str(other_private)})
    assert [k.source for k in keys.trusted(configured)] == [str(other_public)]
    assert keys.signer(configured).public_key == keys.trusted(configured)[0].key


@pytest.mark.parametrize(
    "out, cause",
    [
        ("/etc", "--out /etc is inside the system folder /etc: no place for a private key"),
        ("/usr/local/keys", "is inside the system folder /usr"),
        ("/", "--out / is the root folder"),
        ("/tmp", "--out /tmp is a top-level folder"),
        ("FILE", "is a file, not a folder"),
    ],
)
def test_keygen_refuses_a_file_and_system_folders_and_writes_nothing(tmp_path, out, cause):
    """A trial (issue 21): as root, ``evidence.keygen --out /etc`` wrote the private key into /etc,
    and ``--out /etc/hostname`` said only "File exists"."""
    if out == "FILE":
        out = str(tmp_path / "hostname")
        Path(out).write_text("box\n")
    before = set(Path(out).iterdir()) if Path(out).is_dir() else None
    with pytest.raises(SigningKeyError) as e:
        keys.keygen(Path(out))
    assert cause in e.value.cause and e.value.hint
    if before is not None:
        assert set(Path(out).iterdir()) == before
    assert not Path(out, keys.PRIVATE_NAME).exists()


@pytest.mark.parametrize("failing", ["private", "public"])
def test_keygen_on_a_full_disk_leaves_no_key_and_names_the_file(tmp_path, monkeypatch, failing):
    """A third trial: ``evidence.keygen --out`` on a full tmpfs left a 0-byte private key (the
    next keygen then refused "exists already; keys are never overwritten") and said "no space
    left on the device" naming no file (a write's OSError carries none)."""
    import errno
    import os

    from paddlecd.cli.common import os_error_text
    from paddlecd.signing import keys as signing_keys

    real_fsync, calls = os.fsync, []

    def full(fd):  # the private key's fsync is the first, the public key's the second
        calls.append(fd)
        if len(calls) == (1 if failing == "private" else 2):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    (tmp_path / "there").mkdir()
    folder = tmp_path / "there" / "new" / "keys"  # trial 10: the --out folder was left, empty
    with pytest.raises(OSError) as e:
        signing_keys.keygen(folder)
    assert list((tmp_path / "there").iterdir()) == []
    name = signing_keys.PRIVATE_NAME if failing == "private" else signing_keys.PUBLIC_NAME
    assert os_error_text(e.value)[0] == f"no space left on the device: {folder / name}"


def test_a_trusted_key_file_holding_two_keys_is_refused(tmp_path):
    """Trial 12: a .pub holding another key first and the right one second was read as the
    first, the second dropped: promote's "none of the attestations verifies" named no file."""
    _, first = keys.keygen(tmp_path / "a")
    _, second = keys.keygen(tmp_path / "b")
    both = tmp_path / "both.pub"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    with pytest.raises(SigningKeyError, match=r"both.pub holds 2 PEM blocks"):
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": str(both)}))


def test_a_signing_key_holding_two_keys_is_refused(tmp_path, monkeypatch):
    """Trial 13: PADDLECD_SIGNING_KEY (or a key file) holding two private keys signed with the
    first and dropped the second without a word; the trusted side refuses two keys already."""
    first, _ = keys.keygen(tmp_path / "a")
    second, _ = keys.keygen(tmp_path / "b")
    both = tmp_path / "both.key"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    with pytest.raises(SigningKeyError, match=r"both.key holds 2 PEM blocks; a signing key is "
                                              r"one private key"):
        keys.load_signer(both, "artifacts.signing_key")
    monkeypatch.setenv(keys.ENV_PEM, both.read_text())
    with pytest.raises(SigningKeyError, match=r"\$PADDLECD_SIGNING_KEY holds 2 PEM blocks") as e:
        keys.signer(_settings(tmp_path))
    assert "BEGIN" not in e.value.cause + e.value.hint  # the key itself is never quoted


@pytest.mark.parametrize("value", ["{a},", "{a},,{a}", ",{a}"])
def test_an_empty_entry_in_the_trusted_keys_is_refused(tmp_path, value):
    """Trial 13: ``b.pub,,c.pub`` (and a trailing comma) skipped the empty entry unsaid."""
    _, public = keys.keygen(tmp_path / "a")
    with pytest.raises(SigningKeyError, match="release.trusted_keys has an empty entry"):
        keys.trusted(_settings(tmp_path, **{"release.trusted_keys": value.format(a=public)}))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_key_saved_as_utf16_or_utf32_is_named_so_with_how_to_resave_it(tmp_path, encoding):
    """Trial 20: a key file re-saved as UTF-16 "holds no PEM block", and the hint sent the user
    to make a new pair (signing key) or to list another .pub (trusted key)."""
    private, public = keys.keygen(tmp_path / "k")
    wide = "UTF-32" if encoding == "utf-32" else "UTF-16"
    (tmp_path / "w.key").write_bytes(private.read_text().encode(encoding))
    (tmp_path / "w.pub").write_bytes(public.read_text().encode(encoding))
    with pytest.raises(SigningKeyError) as e:
        keys.load_signer(tmp_path / "w.key", "verify.signing_key")
    assert e.value.cause.endswith(f"is not an unencrypted PEM private key: it is {wide} text, "
                                  "and PEM is ASCII")
    assert e.value.hint.startswith(f"save it as ASCII text, e.g. iconv -f {wide} -t ASCII")
    s = config.load({"release.trusted_keys": str(tmp_path / "w.pub")}, root=tmp_path,
                    environ={})
    with pytest.raises(SigningKeyError) as e:
        keys.trusted(s)
    assert e.value.cause.endswith(f"it is {wide} text, and PEM is ASCII")
    assert e.value.hint.startswith("save it as ASCII text")


def test_a_key_of_another_algorithm_is_named_by_the_algorithm_not_the_class(tmp_path):
    """Trial 21: "is a RSAPrivateKey key", cryptography's class name."""
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

    for key, words in ((rsa.generate_private_key(public_exponent=65537, key_size=2048),
                        "is an RSA key, not ECDSA P-256"),
                       (ed25519.Ed25519PrivateKey.generate(), "is an Ed25519 key, not ECDSA")):
        path = tmp_path / "other.key"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        with pytest.raises(SigningKeyError) as e:
            keys.load_signer(path, "verify.signing_key")
        assert e.value.cause.endswith(words) or words in e.value.cause, e.value.cause


def test_a_trusted_key_path_that_names_nothing_is_told_to_fix_the_path(tmp_path):
    """Trial 21: a typo'd or dangling release.trusted_keys path was told to "create a pair",
    which can verify nothing signed before."""
    (tmp_path / "dangle.pub").symlink_to(tmp_path / "gone.pub")
    for name, shown in (("nokey.pub", ""),
                        ("dangle.pub", f" (a symbolic link (to {tmp_path}/gone.pub))")):
        s = config.load({"release.trusted_keys": str(tmp_path / name)}, root=tmp_path, environ={})
        with pytest.raises(SigningKeyError) as e:
            keys.trusted(s)
        assert e.value.cause.endswith(f"{tmp_path / name}{shown} does not exist"), e.value.cause
        assert e.value.hint.startswith("fix the path in release.trusted_keys")
