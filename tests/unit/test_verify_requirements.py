"""verify/requirements.py: the NVIDIA Container Toolkit's rule for starting an image, without a GPU.

The rule is read from NVIDIA/libnvidia-container src/cli/dsl.c @
5823754b8577d16fabf25a6ef6a1d58f7ff1e5dd and src/cli/configure.c @
09df17a2424704c1e4af310d3ce51fe475ba292a (host values: src/driver.c @
947344949f269687466e11e9a80f766ffffcb488; ``info --csv``: src/cli/info.c @
5decca393a6635d9d599167b27a6072d8de9fc2f), which variables count from
NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go @
1081cecea97d60a9c4e715c3a9ecaa5323d7cdec. The images' strings
are NVIDIA's CUDA base images' (tests/data/drivers/nvidia_require_cuda.json names each source).
"""

from __future__ import annotations

import json

import pytest

from paddlecd.errors import VerifyError
from paddlecd.verify import drivers, requirements
from paddlecd.verify.requirements import Device, Host, InvalidExpression

from support import ROOT

IMAGES = json.loads((ROOT / "tests/data/drivers/nvidia_require_cuda.json").read_text())["images"]


def env_of(cuda: str) -> dict[str, str]:
    image = IMAGES[cuda]
    return {"CUDA_VERSION": image["CUDA_VERSION"],
            "NVIDIA_REQUIRE_CUDA": image["NVIDIA_REQUIRE_CUDA"],
            "NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


def host(driver: str, cuda: str, *brands: str) -> Host:
    return Host(driver=driver, cuda=cuda, devices=tuple(
        Device(index=str(i), uuid=f"GPU-{i}", brand=b, arch="9.0") for i, b in enumerate(brands)))


@pytest.mark.parametrize("v1, op, v2, expected", [
    ("12.10", ">", "12.9", True),  # number by number, not as text
    ("12.0", "=", "12", True),  # trailing .0 parts are ignored
    ("12.2", ">=", "12.6", False),
    ("535.104.05", ">=", "535", True),
    ("535.104.05", "<", "536", True),
    ("535.104.05", "<", "535", False),
    ("550.54.15", "!=", "550.54.15", False),
    ("12..4", "=", "12.4", True),  # runs of dots are skipped
])
def test_versions_compare_as_dsl_compare_version(v1, op, v2, expected):
    """dsl.c dsl_compare_version @ 5823754b: strtoumax per dotted part, then ".0" tails."""
    assert requirements.compare_version(v1, op, v2) is expected


@pytest.mark.parametrize("bad", ["12a", "12.6-rc1", " 12", "v12"])
def test_a_version_with_other_characters_is_invalid(bad):
    """dsl.c dsl_compare_version @ 5823754b: strspn("0123456789.") must cover the string."""
    with pytest.raises(InvalidExpression):
        requirements.compare_version(bad, ">=", "12")


def test_operators_are_picked_as_dsl_c_picks_them():
    """dsl.c evaluate_rule @ 5823754b: the run of "<>=!" picks the first of operators[] it
    begins ("=", "!=", "<", "<=", ">", ">="), so a lone "!" is "!=" and "==" is invalid."""
    h = host("535.104.05", "12.2", "Tesla")
    assert requirements.evaluate("driver!535.104.05", h, h.devices[0]) is not None
    assert requirements.evaluate("driver!536", h, h.devices[0]) is None
    assert requirements.evaluate("DRIVER<536", h, h.devices[0]) is None  # names: strcasecmp
    for bad in ("driver==535", "driver>=", ">=535", "vendor=nvidia", "brand>=tesla"):
        with pytest.raises(InvalidExpression):
            requirements.evaluate(bad, h, h.devices[0])


def test_terms_are_ored_conditions_anded_and_read_lazily():
    """dsl.c dsl_evaluate @ 5823754b: strsep on " " (OR) then "," (AND); a term stops at its first
    false condition and a satisfied term ends the evaluation, so a later invalid one is unread."""
    h = host("535.104.05", "12.2", "Tesla")
    assert requirements.evaluate("cuda>=11.0 bogus=1", h, h.devices[0]) is None
    assert requirements.evaluate("cuda>=99,bogus=1 driver>=535", h, h.devices[0]) is None
    with pytest.raises(InvalidExpression):
        requirements.evaluate("cuda>=99 bogus=1", h, h.devices[0])
    message = requirements.evaluate("cuda>=12.6 brand=geforce,driver>=535", h, h.devices[0])
    assert message == ("unsatisfied condition: cuda>=12.6, please update your driver to a newer "
                       "version, or use an earlier cuda container")


def test_without_device_brand_and_arch_hold():
    """configure.c check_device_arch / check_device_brand @ 09df17a2: no visible device (or no
    brand) means the rule holds; check_cuda_version / check_driver_version likewise without a
    driver value."""
    assert requirements.evaluate("brand=tesla,arch>=9.0", Host("535.104.05", "12.2"), None) is None
    assert requirements.evaluate("cuda>=99,driver>=999", Host(None, None), None) is None


@pytest.mark.parametrize("env, expected", [
    ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_REQUIRE_ARCH": "arch>=8.0"},
     ["arch>=8.0", "cuda>=12.6"]),
    ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all"},
     ["cuda>=12.6"]),
    ({"CUDA_VERSION": "11.8.0"}, ["cuda>=11.8"]),  # a legacy image: CUDA_VERSION only
    ({"CUDA_VERSION": "12"}, ["cuda>=12.0"]),  # semver.MajorMinor of v12
    ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_DISABLE_REQUIRE": "true"}, []),
    ({"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_DISABLE_REQUIRE": "yes"}, ["cuda>=12.6"]),
    ({"PATH": "/usr/bin"}, None),  # nothing stated: the table decides
])
def test_which_variables_are_requirements(env, expected):
    """nvidia-container-toolkit cuda_image.go GetRequirements/IsLegacy/HasDisableRequire @
    1081cece: NVIDIA_REQUIRE_* but JETPACK, legacy cuda>=MAJOR.MINOR, strconv.ParseBool."""
    assert requirements.of_image(env) == expected


@pytest.mark.parametrize("cuda, driver, driver_cuda, brand, starts", [
    # R535 / R550 data-centre hosts start 12.6 images through the branches (cuda-compat)
    ("12.6", "535.104.05", "12.2", "Unknown", True),  # H100/A100: NVML brand NVIDIA → Unknown
    ("12.6", "550.54.15", "12.4", "Tesla", True),
    ("12.6", "560.35.03", "12.6", "GeForce", True),  # the cuda>= term
    ("12.6", "535.104.05", "12.2", "GeForce", False),  # 12.6 lists no geforce branch
    ("12.6", "545.23.08", "12.3", "Unknown", False),  # R545 is no listed branch
    ("12.4", "535.104.05", "12.2", "GeForce", True),  # 12.4 still lists geforce
    ("12.4", "525.147.05", "12.0", "Unknown", True),
    ("12.4", "530.41.03", "12.1", "Tesla", False),
    ("12.0", "450.248.02", "11.0", "Tesla", True),  # brand=tesla,driver>=450,driver<451
    ("12.0", "450.248.02", "11.0", "Unknown", False),
    ("11.8", "470.256.02", "11.4", "Tesla", True),
    ("11.8", "450.248.02", "11.0", "Tesla", False),
    ("11.8", "520.61.05", "11.8", "Quadro", True),
])
def test_nvidia_base_images_on_hosts(cuda, driver, driver_cuda, brand, starts):
    """NVIDIA's 11.8, 12.0, 12.4 and 12.6 base images' NVIDIA_REQUIRE_CUDA (sources in
    tests/data/drivers/nvidia_require_cuda.json) under dsl.c @ 5823754b and configure.c @
    09df17a2, with host values as driver.c @ 94734494 reports them."""
    reqs = requirements.of_image(env_of(cuda))
    outcome = requirements.check(reqs, host(driver, driver_cuda, brand))
    assert outcome.satisfied is starts
    if not starts:
        assert outcome.message.startswith(f"unsatisfied condition: cuda>={cuda}, please update")


def test_every_visible_device_must_satisfy():
    """configure.c configure_command @ 09df17a2: each requirement is evaluated per selected GPU;
    the container gets only the pinned ones (--device)."""
    h = host("535.104.05", "12.2", "GeForce", "Unknown")
    reqs = requirements.of_image(env_of("12.6"))
    assert not requirements.check(reqs, h).satisfied
    assert requirements.check(reqs, h, visible=["1"]).satisfied
    assert requirements.check(reqs, h, visible=["GPU-1"]).satisfied
    assert not requirements.check(reqs, h, visible=["0"]).satisfied


def test_nvidia_container_cli_info_csv_is_read():
    """src/cli/info.c info_command @ 5decca39: the --csv layout (two blocks, printf order
    index, minor, model, brand, uuid, bus location, arch)."""
    out = (
        "NVRM version,CUDA version\n535.104.05,12.2\n\n"
        "Device Index,Device Minor,Model,Brand,GPU UUID,Bus Location,Architecture\n"
        "0,0,NVIDIA H100 80GB HBM3,Unknown,GPU-5e0a,00000000:18:00.0,9.0\n"
        "1,1,NVIDIA RTX A6000, rev 2,Unknown,GPU-77b1,00000000:3b:00.0,8.6\n"
    )
    h = requirements.parse_cli_info(out)
    assert (h.driver, h.cuda) == ("535.104.05", "12.2")
    assert h.devices == (Device("0", "GPU-5e0a", "Unknown", "9.0"),
                         Device("1", "GPU-77b1", "Unknown", "8.6"))
    with pytest.raises(ValueError):
        requirements.parse_cli_info("Driver Version: 535.104.05\n")


@pytest.mark.parametrize("driver, cuda", [
    ("535.104.05", "12.2"), ("550.54.15", "12.4"), ("560.35.03", "12.6"), ("470.256.02", "11.4"),
    ("440.33.01", None),
])
def test_driver_cuda_estimate_from_the_ga_table(driver, cuda):
    """Without nvidia-container-cli: the newest toolkit whose GA driver (NVIDIA CUDA release
    notes, Table 3, in verify/drivers.py) the driver meets."""
    assert drivers.driver_cuda(driver) == cuda


def test_verify_starts_a_12_6_image_on_r535_through_its_branch(monkeypatch):
    """The R535 data-centre host the GA table refused (560.28.03 needed) starts NVIDIA's 12.6
    image: configure.c @ 09df17a2 with the image's NVIDIA_REQUIRE_CUDA (12.6 base Dockerfile)."""
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("535.104.05", 8))
    monkeypatch.setattr(drivers, "host_facts", lambda d: host(d, "12.2", *["Unknown"] * 8))
    result = drivers.require_for("12.6", env_of("12.6"))
    assert result.ok and not result.full and "NVIDIA_REQUIRE_CUDA" in result.message
    monkeypatch.setattr(drivers, "host_facts", lambda d: host(d, "12.2", "GeForce"))
    with pytest.raises(VerifyError) as e:
        drivers.require_for("12.6", env_of("12.6"))
    assert "would not start" in e.value.cause and "cuda>=12.6" in e.value.cause
    with pytest.raises(VerifyError):  # no requirement stated: the GA table decides
        drivers.require_for("12.6", {"PATH": "/usr/bin"})


def test_an_invalid_requirement_is_named(monkeypatch):
    """dsl.c @ 5823754b: an expression it cannot read fails the container ("invalid
    expression"); verify says so before starting one."""
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("560.35.03", 1))
    monkeypatch.setattr(drivers, "host_facts", lambda d: host(d, "12.6", "Tesla"))
    with pytest.raises(VerifyError) as e:
        drivers.require_for("12.6", {"NVIDIA_REQUIRE_CUDA": "cuda=>12.6"})
    assert "cannot be evaluated" in e.value.cause and "cuda=>12.6" in e.value.cause
