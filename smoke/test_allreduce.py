"""AllReduce across all cards (NCCL) or 2 CPU processes (gloo): exact sums, busbw reported."""

from __future__ import annotations

from _common import collective, require_collective


def test_allreduce_exact_sums(expect, metric):
    require_collective(expect)
    result = collective(expect, "allreduce")
    metric("world_size", result["world_size"])
    metric("backend", result["backend"])
    metric("results", result["results"])
    metric("figures", result.get("figures", []))
    assert result["world_size"] == expect.ranks
    wrong = {f"{r['dtype']}x{r['elements']}": r["wrong"] for r in result["results"] if r["wrong"]}
    metric("wrong_elements", sum(wrong.values()))
    assert not wrong, f"all_reduce produced wrong elements: {wrong}"
    largest = max(result["results"], key=lambda r: (r["bytes"], r["busbw_GBps"]))
    metric("busbw_GBps_largest", largest["busbw_GBps"])
    assert largest["busbw_GBps"] > 0
