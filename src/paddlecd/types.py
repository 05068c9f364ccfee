"""Shared type aliases: one name per concept across the rooms (STYLE.md §18).

``Echo`` is every callback that receives one line of text: a command being run, a build or
push log line, a layer's progress, a promotion step. Byte-count progress is another concept:
``Transfer`` when a tool reports where a named download stands (the base bootstrap's packages and
wheels), ``paddlecd.artifacts.storage.Progress`` (``Callable[[int], None]``, bytes moved since the
last call) when paddlecd moves the bytes itself.
"""

from __future__ import annotations

from collections.abc import Callable

Echo = Callable[[str], None]
"""A sink for one line of text (no trailing newline); the CLI layer decides where it goes."""

Transfer = Callable[[str, int, int | None, float | None], None]
"""A sink for the byte progress of one named download: ``(name, bytes so far, bytes in all, at)``,
the total None while unknown, ``at`` the seconds on the tool's own clock when it said so (None:
now; BuildKit passes a step's output on in bursts, so the time a line arrives is not when it was
printed); called again with the same name as it advances."""
