"""The verify room: run the smoke suite inside an image digest and keep what it measured.

Modules: :mod:`.run` (the smoke container, JUnit parsing, the step summary), :mod:`.evidence` (the
evidence record keyed by digest), :mod:`.drivers` (the host's driver and cards, NVIDIA's driver
table), :mod:`.requirements` (the NVIDIA Container Toolkit's rule on an image's
``NVIDIA_REQUIRE_CUDA``),
:mod:`.bandwidth` (busbw expectations per GPU setup), :mod:`.nccl` (the transports NCCL chose),
:mod:`.charts` (busbw and loss pictures for summaries).
"""
