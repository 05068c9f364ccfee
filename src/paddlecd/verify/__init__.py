"""The verify room: run the smoke suite inside an image digest and keep what it measured.

Modules: :mod:`.run` (the smoke container, JUnit parsing, the step summary), :mod:`.evidence` (the
evidence record keyed by digest), :mod:`.drivers` (NVIDIA's minimum driver per CUDA release),
:mod:`.bandwidth` (busbw expectations per GPU setup), :mod:`.nccl` (the transports NCCL chose),
:mod:`.charts` (busbw and loss pictures for summaries).
"""
