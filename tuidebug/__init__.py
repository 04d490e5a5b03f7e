"""tuidebug: a terminal debugger for PyTorch training runs.

The one function a script may call is ``watch``; everything else runs from the ``tuidebug``
command. Importing this package imports neither torch nor Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"


def watch(model: Any, optimizer: Any = None, loss_fn: Callable[[Any, Any], Any] | None = None) -> None:
    """Name the model, optimizer and loss for tuidebug's probes. A no-op when not run under tuidebug.

    ``loss_fn(model, batch)`` returns the scalar loss of ``model`` on a batch as the DataLoader
    yields it. It lets probes train a copy of the model when they cannot replay the script's own
    loop (after the script ended, or without a DataLoader).
    """
    core = sys.modules.get("tuidebug.agent.core")
    agent = getattr(core, "CURRENT", None)
    if agent is not None:
        agent.watch(model, optimizer, loss_fn)
