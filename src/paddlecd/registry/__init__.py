"""The registry room: image references, the OCI distribution client, its HTTP transport,
credentials.

Modules: :mod:`.reference` (parsing ``host/repo:tag@sha256:…``), :mod:`.client` (manifests with
their exact bytes, blobs, mounts, tags), :mod:`.transport` (sessions, retries, auth challenges,
error translation), :mod:`.auth` (Docker config.json / env credentials, the token protocol).
"""
