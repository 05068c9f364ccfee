"""paddlecd: CI/CD toolkit for PaddlePaddle container images.

The public API is re-exported here as the modules land; ``tasks.py`` is the command-line layer.
"""

from .errors import PaddlecdError

__version__ = "0.1.0"
__all__ = ["PaddlecdError", "__version__"]
