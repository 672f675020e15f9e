"""No cyclic garbage collection while streams are open.

The client timestamps each read of a stream. A full collection of a large heap can stop the
measuring process for tens to hundreds of milliseconds; meanwhile the kernel buffers what the
server writes, and the next read returns it all at once. A TTFT then reads late, a decode window
short, and a short stream arrives in one read (its decode rate undefined). So collection is
paused from the first send to the last byte of an iteration and runs between iterations, outside
every measured window. Reference counting still frees memory as usual; only the cycle collector
waits, and an iteration allocates little enough (C streams of at most a few thousand events) for
that to be harmless.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cycle collector for the block; restore the caller's setting after it, also
    on an exception. Nested use is harmless (the inner block restores "disabled")."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
