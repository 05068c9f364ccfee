"""The image room: variants, the base lock, the air-gapped base bootstrap, build and push.

Modules: :mod:`.variants` (images/variants.yaml), :mod:`.lock` (base tag → digest pins),
:mod:`.bootstrap` (the CPU base from debootstrap + PyPI), :mod:`.downloads` (the byte progress
debootstrap and pip report while it runs), :mod:`.build` (BuildKit build, labels,
secrets), :mod:`.push` (push, digest read-back), :mod:`.candidate` (the record of the last push
that verify and promote take), :mod:`.provenance` (how it was built, a signed SLSA referrer).
"""
