"""Kubernetes resource quantities (``"500m"``, ``"4Gi"``, ``2``) as exact numbers, no client needed.

The grammar is Kubernetes' own (k8s.io/apimachinery ``pkg/api/resource/quantity.go``, the comment
on ``type Quantity``)::

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <signedNumber>    ::= <number> | <sign><number>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

As in quantity.go's parser, ``n`` and ``u`` are accepted as decimal SI suffixes too, and the
exponent is an integer. Kept out of :mod:`.k8s` so that job files can be checked (and
``paddlecd.cluster`` imported) without loading the Kubernetes client.
"""

from __future__ import annotations

import re
from decimal import Decimal

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_QUANTITY = re.compile(
    rf"({_NUMBER})(?:(?P<bin>[KMGTPE]i)|[eE](?P<exp>[+-]?\d+)|(?P<dec>[numkMGTPE]?))")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(quantity: str | int) -> Decimal:
    """A Kubernetes quantity as an exact number: cores for CPU (``"500m"`` → 0.5), bytes for memory
    (``"4Gi"`` → 4294967296).

    Raises:
        ValueError: ``quantity`` does not follow the grammar (the job file schema rejects it first).
    """
    if isinstance(quantity, int):
        return Decimal(quantity)
    m = _QUANTITY.fullmatch(str(quantity))
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r} (e.g. 500m, 2, 4Gi)")
    number = Decimal(m.group(1))
    if m.group("bin"):
        return number * 1024 ** _BINARY[m.group("bin")]
    if m.group("exp") is not None:
        return number.scaleb(int(m.group("exp")))
    return number.scaleb(_DECIMAL[m.group("dec")])
