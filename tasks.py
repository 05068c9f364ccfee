"""paddlecd tasks: the entry point of `invoke` from the project root.

The tasks live in the package's CLI layer, paddlecd.cli (one module per namespace). Run
`invoke --list` for the tasks, `invoke <task> --help` for one; PADDLECD_DEBUG=1 shows tracebacks.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "src"))  # works from a plain checkout, too

from paddlecd.cli import argv, common, ns  # noqa: E402

common.quiet_broken_pipe()
argv.help_after_positional(sys.argv, ns.task_names)
common.refuse_unparseable(sys.argv, ns)

__all__ = ["ns"]
