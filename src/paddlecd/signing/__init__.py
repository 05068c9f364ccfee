"""The signing room: keys, signed in-toto Statements and their Sigstore bundle form.

What verify's evidence and push's build provenance are both signed with, below either of them:
:mod:`.keys` (the signing key, the trusted public keys, keygen, key ids), :mod:`.dsse` (an
in-toto Statement in a DSSE envelope: sign it, parse it, check its signer, subject and type),
:mod:`.bundle` (the Sigstore bundle v0.3 form cosign, Kyverno and sigstore-js read).
"""
