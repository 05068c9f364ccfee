"""ContainerSpec → docker-py options, the one translation the engine makes (no daemon needed)."""

from __future__ import annotations

import pytest

from paddlecd import engine
from paddlecd.errors import EngineError


def test_a_minimal_spec_sets_only_what_it_says_and_names_its_network_mode():
    """The network mode is never left to the engine: podman's compat API reads only an explicit
    one (it ignores NetworkDisabled)."""
    kwargs = engine._run_kwargs(engine.ContainerSpec(image="r/x@sha256:" + "a" * 64))
    assert kwargs == {"environment": {}, "volumes": {}, "labels": {}, "network_mode": "bridge"}


def test_limits_mounts_and_aliases():
    spec = engine.ContainerSpec(
        image="r/x", name="job-0", network="job", aliases=("job-0.job",), cpus=0.25,
        memory=2**30, shm_size="1g", user="1000:1000",
        mounts=(engine.Mount("/data", "/in", read_only=True), engine.Mount("claim", "/out")))
    kwargs = engine._run_kwargs(spec)
    assert kwargs["nano_cpus"] == 250_000_000 and kwargs["mem_limit"] == 2**30
    assert (kwargs["shm_size"], kwargs["user"], kwargs["name"]) == ("1g", "1000:1000", "job-0")
    assert kwargs["volumes"] == {"/data": {"bind": "/in", "mode": "ro"},
                                 "claim": {"bind": "/out", "mode": "rw"}}
    assert kwargs["network"] == "job"
    assert kwargs["networking_config"]["job"]["Aliases"] == ["job-0.job"]


def test_aliases_without_a_network_are_refused():
    with pytest.raises(EngineError, match="aliases without a network"):
        engine._run_kwargs(engine.ContainerSpec(image="r/x", aliases=("a",)))


@pytest.mark.parametrize("gpus,request_", [
    ("all", {"Count": -1, "DeviceIDs": []}),
    (("2", "3"), {"Count": 0, "DeviceIDs": ["2", "3"]}),
])
def test_gpu_requests(gpus, request_):
    """GPU-only: ``--gpus all`` or the given cards, as the NVIDIA Container Toolkit reads them."""
    (req,) = engine._run_kwargs(engine.ContainerSpec(image="r/x", gpus=gpus))["device_requests"]
    assert {k: req[k] for k in request_} == request_ and req["Capabilities"] == [["gpu"]]
