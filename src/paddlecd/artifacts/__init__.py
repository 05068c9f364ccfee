"""The artifacts room: exported ``paddle.jit.save`` models, their manifests, and the object stores.

Modules: :mod:`.manifest` (export discovery and the sha256 manifest), :mod:`.transfer` (upload,
download, list), :mod:`.storage` (the store interface and its file:// and s3:// implementations).
"""
