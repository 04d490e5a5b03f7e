"""The diagnostic probes, one module per family; each registers itself with ``probe_api.probe``.

A probe runs in the training process while the run is paused, on its own thread, and returns a
``ProbeOutcome``. It reaches the run only through its ``ProbeContext`` (``tuidebug.probe_api``):
what the hooks observed, and ``ctx.trainer`` to run the user's pipeline. The agent restores every
piece of state afterwards. Importing this package registers every family.
"""

from tuidebug.probes import (  # noqa: F401
    batch_mixing, evaluation, exception, held_frozen, inputs, learning, memory, nan, overfit, replay, shape, unsafe_math)
