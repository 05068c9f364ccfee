"""paddlecd.registry.client against a real distribution registry (htpasswd auth over TLS, our own CA)."""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from paddlecd import config, engine
from paddlecd.errors import NotFoundError, RegistryAuthError, RegistryError
from paddlecd.localstack import RegistryServer, free_port
from paddlecd.registry.auth import Credentials
from paddlecd.registry.client import RegistryClient, client_for, open_reference

from support.oci_images import push_image, push_index


def _repo(prefix: str = "t") -> str:
    return f"{prefix}/{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(registry_env) -> RegistryClient:
    return client_for(config.load())


@pytest.fixture(scope="module")
def plain_registry(tmp_path_factory):
    """A second registry (plain HTTP, no auth) to copy across registries."""
    server = RegistryServer(tmp_path_factory.mktemp("plain-registry"), port=free_port()).start()
    yield server
    server.stop()


def test_resolve_put_get_and_list(client):
    repo = _repo()
    digest = push_image(client, repo, "cpu-abc123")
    desc = client.resolve(repo, "cpu-abc123")
    assert desc.digest == digest
    assert desc.media_type == "application/vnd.oci.image.manifest.v1+json"
    manifest = client.get_manifest(repo, digest)
    assert manifest.descriptor.digest == digest and desc.size == len(manifest.raw)
    assert all(client.blob_exists(repo, b.digest) for b in manifest.children())
    client.put_manifest(repo, "second", manifest.raw, desc.media_type)
    assert sorted(client.list_tags(repo)) == ["cpu-abc123", "second"]
    assert client.list_tags(_repo("absent")) == []


def test_engine_pushed_image_resolves_to_the_engine_digest(registry_env, tmp_path, client):
    """The path the main job uses: docker import → docker push → resolve gives the pushed digest."""
    tar_path = tmp_path / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("hello.txt")
        data = uuid.uuid4().hex.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    repo = _repo("engine")
    ref = f"{registry_env.host}/{repo}:cpu-1"
    engine.import_rootfs(str(tar_path), ref)
    try:
        pushed = engine.push(ref)
    finally:
        engine.remove_image(ref)
    desc = client.resolve(repo, "cpu-1")
    assert desc.digest == pushed
    assert desc.media_type == "application/vnd.docker.distribution.manifest.v2+json"


def test_mount_across_repositories_moves_no_bytes(client):
    src, dst = _repo("ci"), _repo("release")
    digest = push_image(client, src)
    before = client.stats["bytes_uploaded"]
    counts = client.copy_image(client, src, digest, dst)
    assert counts["mounted"] == 3 and counts["copied"] == 1  # config + 2 layers mounted; manifest PUT
    assert client.stats["bytes_uploaded"] == before
    assert client.resolve(dst, digest).digest == digest
    again = client.copy_image(client, src, digest, dst)
    assert again == {"present": 4}


def test_copy_of_an_index_copies_children_by_digest(client):
    src, dst = _repo("ci"), _repo("release")
    digest, children = push_index(client, src, "multi")
    desc = client.resolve(src, "multi")
    assert (desc.digest, desc.media_type) == (digest, "application/vnd.oci.image.index.v1+json")
    counts = client.copy_image(client, src, digest, dst)
    assert counts == {"mounted": 4, "copied": 3}  # 2 × (config + layer) mounted; 2 children + index PUT
    assert [client.resolve(dst, c).digest for c in children] == children
    assert client.get_manifest(dst, digest).is_index


def test_mount_of_unknown_blob_asks_for_upload(client):
    src, dst = _repo("ci"), _repo("release")
    push_image(client, src)
    assert client.mount_blob(src, dst, "sha256:" + "0" * 64) is False


def test_copy_across_registries_streams_only_missing_blobs(client, plain_registry):
    src = _repo("ci")
    digest = push_image(client, src, layers=2, layer_size=50_000)
    target = RegistryClient(plain_registry.host, insecure=True)
    counts = target.copy_image(client, src, digest, "release/paddle")
    assert counts == {"copied": 4}
    sizes = sum(b.size for b in client.get_manifest(src, digest).children())
    assert target.stats["bytes_uploaded"] == sizes
    assert target.resolve("release/paddle", digest).digest == digest
    assert target.copy_image(client, src, digest, "release/paddle") == {"present": 4}
    assert target.stats["bytes_uploaded"] == sizes


def test_unknown_tag_and_blob_are_not_found(client):
    repo = _repo()
    push_image(client, repo, "a")
    with pytest.raises(NotFoundError, match="MANIFEST_UNKNOWN"):
        client.get_manifest(repo, "nope")
    with pytest.raises(NotFoundError, match=f"{repo}:nope"):
        client.resolve(repo, "nope")
    assert client.blob_exists(repo, "sha256:" + "1" * 64) is False


def test_wrong_password_is_an_auth_error_without_the_secret(registry):
    c = RegistryClient(registry.host, ca_file=str(registry.ca_file), credentials=Credentials("ci", "wrong-Secret-9"))
    with pytest.raises(RegistryAuthError) as info:
        c.list_tags("any/repo")
    assert "docker login" in info.value.hint and "wrong-Secret-9" not in info.value.cause + info.value.hint


def test_no_credentials_is_an_auth_error(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("PADDLECD_REGISTRY_USERNAME", raising=False)
    c = RegistryClient(registry.host, ca_file=str(registry.ca_file))
    with pytest.raises(RegistryAuthError, match="denied access"):
        c.resolve("any/repo", "latest")


def test_env_credentials_work(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "s3cret-Pa55")
    assert RegistryClient(registry.host, ca_file=str(registry.ca_file)).list_tags(_repo()) == []


def test_tls_without_our_ca_fails_clearly(registry):
    with pytest.raises(RegistryError, match="TLS with") as info:
        RegistryClient(registry.host).list_tags("x/y")
    assert "ca_file" in info.value.hint


def test_unreachable_registry_names_host(tmp_path):
    port = free_port()
    c = RegistryClient(f"127.0.0.1:{port}", insecure=True, retries=2)
    with pytest.raises(RegistryError, match=f"127.0.0.1:{port} unreachable.*is it running"):
        c.resolve("x/y", "latest")


def test_open_reference_and_delete(registry_env):
    settings = config.load()
    client, _ = open_reference(settings, f"{registry_env.host}/x/y:1")
    repo = _repo()
    digest = push_image(client, repo, "gone")
    client.delete_manifest(repo, digest)
    with pytest.raises(NotFoundError):
        client.resolve(repo, "gone")
