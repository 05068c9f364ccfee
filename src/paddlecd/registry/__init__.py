"""The registry room: image references, the OCI distribution client, its HTTP transport,
credentials.

Modules: :mod:`.reference` (parsing ``host/repo:tag@sha256:…``), :mod:`.client` (manifests with
their exact bytes, blobs, mounts, tags), :mod:`.transport` (sessions, retries, auth challenges,
error translation), :mod:`.auth` (Docker config.json / env credentials, the token protocol),
:mod:`.answers` (an error answer's status and OCI code → one typed error), :mod:`.referrers`
(OCI 1.1 ``subject`` manifests and a digest's referrers), :mod:`.cosign` (cosign's layouts:
bundle referrer, ``.att`` tag), :mod:`.embedded` (the default registry: CNCF distribution on
127.0.0.1).
"""
