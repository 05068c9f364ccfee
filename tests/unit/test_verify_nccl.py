"""The NCCL transport parser on NCCL_DEBUG=INFO lines, and the busbw row it then selects.

Formats read from NVIDIA/nccl v2.21.5-1 (ab2b89c4c339bd7f816fbc114a4b05d386b66290) and master
5067397c2676d5aed50042fc39e5c8ee96eb0027: src/init.cc ("%d coll channels, %d collnet channels,
%d nvls channels, …"; v2.18.5-1 559b70f8 without the collnet field), src/transport/p2p.cc,
shm.cc, net.cc, coll_net.cc, nvls.cc. Lines marked with an issue are copied from the log posted
there (host names shortened); the others are the format string filled in.
"""

from __future__ import annotations

import pytest

from paddlecd.verify import bandwidth, nccl

GIB = 1 << 30

# One node of 8 H100 without NVLink SHARP (NVIDIA/nccl#1189, NCCL 2.19+ format): K = 0.
NO_NVLS = [
    "H20-GPU-06:4015539:4015652 [0] NCCL INFO 8 coll channels, 0 collnet channels,"
    " 0 nvls channels, 8 p2p channels, 2 p2p channels per peer",
    "036260b61d3a:33347:33366 [6] NCCL INFO 16 coll channels, 0 nvls channels, 16 p2p channels,"
    " 16 p2p channels per peer",  # NVIDIA/nccl#892, NCCL 2.18 format
    "036260b61d3a:33347:33367 [7] NCCL INFO Channel 15/0 : 7[7] -> 4[4] via P2P/direct pointer",
    "job-worker-0:5668:5722 [5] NCCL INFO NVLS multicast support is available on dev 5",  # #1538
    # NVIDIA/nccl-tests#228: an IB host on one node names the plugin, its channels are SHM/P2P
    "user:5181:5232 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO];"
    " OOB ibs85f0:192.168.1.10<0>",
    "user:5181:5232 [2] NCCL INFO Using network IB",
]
# The same node with NVLS set up: K > 0 and the NVLS buffers (nvls.cc ncclNvlsBufferSetup).
WITH_NVLS = [
    "h100:101:202 [0] NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls channels,"
    " 32 p2p channels, 32 p2p channels per peer",
    "h100:101:202 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
]
NVLS_SETUP = ("h100:101:202 [0] NCCL INFO NVLS comm 0x55d0c0 headRank 0 nHeads 8 nvlsRanks 8"
              " buffSize 1048576 nvlsPerRankSize 33554432 nvlsTotalSize 268435456")
TWO_NODES_IB = [
    "10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive]"
    " via NET/IB/5/GDRDMA",  # NVIDIA/nccl#707
    "hostname-test:987:1260 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive]"
    " via NET/IBext_v8/2",  # NVIDIA/nccl#1814: the RDMA/SHARP plugin's IB
    "node:1:2 [2] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send]"
    " via NET/IB/0(1)/GDRDMA",  # net.cc: through the proxy rank 1
]
TWO_NODES_SOCKET = [
    "<cluster_name>:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send]"
    " via NET/Socket/3",  # NVIDIA/nccl#952
    "<cluster_name>:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read",
]
SHM = [
    "user:5186:5235 [7] NCCL INFO Channel 00 : 7[ca000] -> 6[c7000] via SHM/direct/direct",
    "node:1:2 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct",  # shm.cc at master
]
COLLNET = [
    "node:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA",
    "node:1:2 [0] NCCL INFO rank 0 Connected CollNet",
]


@pytest.mark.parametrize("lines, expected", [
    (NO_NVLS, ("P2P",)),
    (WITH_NVLS, ("P2P", "NVLS")),
    ([NVLS_SETUP], ("NVLS",)),
    (["h:1:2 [0] NCCL INFO Connected NVLS tree"], ("NVLS",)),
    (TWO_NODES_IB, ("IB",)),
    (TWO_NODES_IB[1:2], ("IB",)),
    (TWO_NODES_SOCKET, ("Socket", "P2P")),
    (SHM, ("SHM",)),
    (COLLNET, ("CollNet",)),
    (COLLNET[1:], ("CollNet",)),
    ([], ()),
])
def test_transports_from_info_lines(lines, expected):
    assert nccl.transports(lines) == expected


def test_zero_nvls_channels_and_the_collnet_count_are_no_transport():
    """init.cc logs K = 0 on every communicator and prints comm->nChannels as the collnet count."""
    assert "NVLS" not in nccl.transports(NO_NVLS[:2])
    assert "CollNet" not in nccl.transports(WITH_NVLS[:1])
    assert nccl.transports(WITH_NVLS[:1]) == ("NVLS",)


def test_lines_that_are_not_nccl_info_are_ignored():
    assert nccl.transports(["[rank 0] a training line via NET/Socket/0 and 8 nvls channels",
                            "h:1:2 [0] NCCL WARN Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"]) == ()


def _sweep(busbw_at_1gib: float) -> list[dict]:
    sizes = [1 << p for p in range(12, 31, 2)]
    return [{"elements": s // 4, "dtype": "float32", "bytes": s, "wrong": 0,
             "busbw_GBps": busbw_at_1gib * s / GIB} for s in sizes]


@pytest.mark.parametrize("name, lines, cards, nodes, row", [
    ("NVIDIA H100 80GB HBM3", NO_NVLS, 8, 1, ("H100-SXM", "nvlink", 370.0)),  # ring, not 480
    ("NVIDIA H100 80GB HBM3", WITH_NVLS, 8, 1, ("H100-SXM", "nvls", 480.0)),
    ("NVIDIA A100-SXM4-80GB", NO_NVLS, 8, 1, ("A100-SXM", "nvlink", 230.0)),
    ("NVIDIA H100 PCIe", NO_NVLS[:1] + ["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1]"
                                        " via P2P/IPC"], 2, 1, ("H100-PCIe", "p2p", 115.0)),
    ("NVIDIA A100-SXM4-40GB", TWO_NODES_IB + NO_NVLS, 8, 3, ("A100-SXM", "ib", 96.0)),
])
def test_the_busbw_row_follows_the_parsed_transports(name, lines, cards, nodes, row):
    j = bandwidth.judge(_sweep(row[2]), gpu_name=name, cards=cards, nodes=nodes,
                        transports=nccl.transports(lines))
    assert j.verdict == "pass"
    assert (j.expected.gpu, j.expected.interconnect, j.expected.busbw_GBps) == row
