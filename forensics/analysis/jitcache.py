"""Stale compiled-code caches are recompiled, never an error.

The compiled kernels are cached on disk (`cache=True`): next to their sources in `__pycache__`,
or under NUMBA_CACHE_DIR. A cache's index names the argument types of each compiled version,
named tuples included, by module and class name, and numba reads those names back before it
checks whether the source changed. After an upgrade that renames or removes such a class, an
old index therefore failed to load (AttributeError) instead of being recompiled. Importing this
module makes an index that cannot be read count as empty: the kernel is compiled again and the
index rewritten. Every module with cached kernels imports it.
"""

from __future__ import annotations

import pickle
from typing import Any

from numba.core import caching

# What reading an index written by another version of the code can raise: a class or module
# that is gone, or a pickle that does not match.
STALE_INDEX_ERRORS = (
    AttributeError,
    ImportError,
    EOFError,
    TypeError,
    ValueError,
    pickle.UnpicklingError,
)


def _load_index_or_empty(self: Any) -> dict:
    try:
        index: dict = _load_index(self)
    except STALE_INDEX_ERRORS:
        return {}
    return index


_index_file: Any = caching.IndexDataCacheFile
# numba's own reader (also when this module is loaded again: it is kept as __wrapped__).
_load_index = getattr(_index_file._load_index, "__wrapped__", _index_file._load_index)
_load_index_or_empty.__wrapped__ = _load_index  # type: ignore[attr-defined]
_index_file._load_index = _load_index_or_empty
