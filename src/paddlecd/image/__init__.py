"""The image room: variants, the base lock, the air-gapped base bootstrap, build and push.

Modules: :mod:`.variants` (images/variants.yaml), :mod:`.lock` (base tag → digest pins),
:mod:`.bootstrap` (the CPU base from debootstrap + PyPI), :mod:`.build` (BuildKit build, labels,
secrets), :mod:`.push` (push, digest read-back, the candidate record).
"""
