"""Kubernetes quantities by apimachinery's grammar (quantity.go), parsed without the client."""

from __future__ import annotations

from decimal import Decimal

import pytest

from paddlecd.cluster.quantity import parse_quantity


@pytest.mark.parametrize("text,value", [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), (2, Decimal(2)), ("4Gi", Decimal(4 * 2**30)),
    ("256Mi", Decimal(256 * 2**20)), ("1.5", Decimal("1.5")), (".5", Decimal("0.5")),
    ("5.", Decimal(5)),
    ("1k", Decimal(1000)), ("1Ki", Decimal(1024)), ("1e3", Decimal(1000)), ("1E3", Decimal(1000)),
    ("1E", Decimal(10**18)), ("+2M", Decimal(2 * 10**6)), ("-1", Decimal(-1)),
    ("100n", Decimal("1e-7")),
])
def test_quantities_of_the_grammar(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1ki", "1K", "1.2.3", "1e1.5", "1 Gi", "one", "1Gb"])
def test_what_the_grammar_rejects(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)
