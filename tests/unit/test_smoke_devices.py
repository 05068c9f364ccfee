"""smoke/_devices.py: the card each launched process uses, on the environments the launcher sets.

The environments in tests/data/smoke/launcher_env.json are recorded from paddlepaddle 3.0.0's
``paddle.distributed.launch`` (commit 6ed5dd3833c32c3b21e14b1fb1a71f5a535a0fcc); the rule is read
from that commit's python/paddle/distributed/launch/controllers/collective.py (per-process
variables), launch/context/device.py (``get_selected_devices``: positions in the visible devices)
and distributed/parallel.py (``ParallelEnv``: ``device_id`` from ``FLAGS_selected_gpus``,
``local_rank = rank`` = ``PADDLE_TRAINER_ID``).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from support import ROOT

CASES = json.loads((ROOT / "tests/data/smoke/launcher_env.json").read_text())["cases"]


def _devices():
    spec = importlib.util.spec_from_file_location("smoke_devices", ROOT / "smoke/_devices.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


devices = _devices()


@pytest.mark.parametrize("case, cards, expected", [
    ("1x8", 8, [0, 1, 2, 3, 4, 5, 6, 7]),
    ("2x1", 1, [0, 0]),
    ("2x1of8", 8, [0, 0]),  # one process on a node of 8: FLAGS_selected_gpus lists all 8
    ("2x4", 4, [0, 1, 2, 3, 0, 1, 2, 3]),
    ("pinned", 2, [0, 1]),  # CUDA_VISIBLE_DEVICES=2,3 renumbers the two cards 0 and 1
])
def test_each_rank_gets_its_card_on_its_node(case, cards, expected):
    ranks = CASES[case]["ranks"]
    assert [devices.device_index(env, cards=cards) for env in ranks] == expected


@pytest.mark.parametrize("case, cards", [("2x1", 1), ("2x4", 4)])
def test_the_global_rank_names_no_card_on_the_second_node(case, cards):
    """What ``ParallelEnv().local_rank`` (= ``PADDLE_TRAINER_ID``) would pick: past the cards."""
    second_node = [env for env in CASES[case]["ranks"] if env["PADDLE_LOCAL_RANK"] == "0"][1]
    assert int(second_node["PADDLE_TRAINER_ID"]) >= cards


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
def test_paddle_local_rank_is_the_global_rank(monkeypatch):
    """The installed Paddle agrees with the reading: ``local_rank`` is ``PADDLE_TRAINER_ID``."""
    paddle = pytest.importorskip("paddle")
    for key, value in CASES["2x4"]["ranks"][5].items():
        monkeypatch.setenv(key, value)
    env = paddle.distributed.ParallelEnv()
    assert (env.local_rank, env.world_size) == (5, 8)


@pytest.mark.parametrize("env, expected", [
    ({}, 0),  # not launched: one process
    ({"PADDLE_LOCAL_RANK": "3", "PADDLE_TRAINER_ID": "7"}, 3),  # no FLAGS_selected_gpus
    ({"PADDLE_TRAINER_ID": "6", "PADDLE_LOCAL_SIZE": "4"}, 2),
    ({"PADDLE_TRAINER_ID": "5"}, 1),  # processes per node default to the cards
])
def test_without_the_launchers_card_the_local_rank_decides(env, expected):
    assert devices.device_index(env, cards=4) == expected


@pytest.mark.parametrize("env, cards, message", [
    ({"FLAGS_selected_gpus": "4", "PADDLE_TRAINER_ID": "5", "PADDLE_TRAINERS_NUM": "8"}, 4,
     "rank 5 of 8: device 4 (from FLAGS_selected_gpus) is not one of the 4 visible cards 0…3"),
    ({"FLAGS_selected_gpus": "0"}, 0, "no CUDA device is visible"),
    ({"PADDLE_LOCAL_RANK": "one"}, 2, "PADDLE_LOCAL_RANK='one' is not a device index"),
])
def test_a_card_that_is_not_visible_is_a_clear_error(env, cards, message):
    with pytest.raises(ValueError) as e:
        devices.device_index(env, cards=cards)
    assert message in str(e.value)


def test_launch_devices_are_the_visible_labels():
    """The launcher looks each ``--devices`` label up in CUDA_VISIBLE_DEVICES
    (device.py ``self._labels.index(d)``): ``--devices 0,1`` under ``2,3`` is a ValueError."""
    assert devices.launch_devices({}, gpus=2) == ["0", "1"]
    assert devices.launch_devices({"CUDA_VISIBLE_DEVICES": "all"}, gpus=2) == ["0", "1"]
    assert devices.launch_devices({"CUDA_VISIBLE_DEVICES": "2,3"}, gpus=2) == ["2", "3"]
    assert devices.launch_devices({"CUDA_VISIBLE_DEVICES": "5, 6,7"}, gpus=2) == ["5", "6"]
    with pytest.raises(ValueError, match="lists 1 cards, not 2"):
        devices.launch_devices({"CUDA_VISIBLE_DEVICES": "3"}, gpus=2)
