"""The verify room: run the smoke suite inside an image digest and keep what it measured.

Modules: :mod:`.run` (the smoke container, JUnit parsing, the step summary), :mod:`.suite` (the
checks ``smoke/`` holds), :mod:`.evidence` (the evidence record keyed by digest), :mod:`.drivers`
(the host's driver and cards, NVIDIA's driver table), :mod:`.requirements` (the NVIDIA Container
Toolkit's rule on an image's ``NVIDIA_REQUIRE_CUDA``), :mod:`.bandwidth` (busbw expectations per
GPU setup), :mod:`.nccl` (the transports NCCL chose), :mod:`.charts` (busbw and loss pictures for
summaries), :mod:`.nodes` (``--nodes N``: the collective checks as an N-node job),
:mod:`.nodes_k8s` (the same on Kubernetes), :mod:`.budget` (a GPU node's memory and /dev/shm).
Upgrade gates: :mod:`.figures` (the speed figures a run recorded), :mod:`.models` (the models
gate's results).
Attestations: :mod:`.attestation` (verify's in-toto Statement and the promotion rule; keys,
envelopes and bundles are the signing room's, :mod:`paddlecd.signing`), :mod:`.registry_store`
(publish, check and copy them in the registry), :mod:`.stored` (a digest's runs in every layout),
:mod:`.describe` (a signed run as a person reads it).
"""

