"""Shared type aliases: one name per concept across the rooms (STYLE.md §18).

``Echo`` is every callback that receives one line of text: a command being run, a build or
push log line, a layer's progress, a promotion step. Byte-count progress is another concept
(``paddlecd.artifacts.storage.Progress``, ``Callable[[int], None]``) and keeps its own name.
"""

from __future__ import annotations

from collections.abc import Callable

Echo = Callable[[str], None]
"""A sink for one line of text (no trailing newline); the CLI layer decides where it goes."""
