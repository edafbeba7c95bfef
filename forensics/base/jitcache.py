"""Stale compiled-code caches are recompiled, never an error, and never run.

The compiled kernels are cached on disk (`cache=True`): next to their sources in `__pycache__`,
or under NUMBA_CACHE_DIR. A cache's index names the argument types of each compiled version,
named tuples included, by module and class name, and numba reads those names back before it
checks whether the source changed. After an upgrade that renames or removes such a class, an
old index therefore failed to load (AttributeError) instead of being recompiled. Importing this
module makes an index that cannot be read count as empty: the kernel is compiled again and the
index rewritten.

numba also judges a cache fresh by its own source file alone, while a kernel's compiled code
includes the kernels it calls from other modules: after a change to forensics/analysis/kinds.py
only, the cached sweep would still run the old classification. Here a kernel's source stamp
also covers every module of its folder (SHARED_FOLDERS: the forensics package's folders), so a
change to any of them recompiles the kernels beside it. Every module with cached kernels
imports this one.
"""

from __future__ import annotations

import hashlib
import pickle
from functools import cache
from pathlib import Path
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


# Folders whose kernels' cache stamps cover every module in the folder; a subfolder of one
# counts too. (A test adds its own package.)
SHARED_FOLDERS: set[Path] = {Path(__file__).resolve().parents[1]}  # the forensics package


def _shared_folder(path: Path) -> bool:
    return any(path == f or f in path.parents for f in SHARED_FOLDERS)


@cache
def _folder_digest(folder: Path, listing: tuple[tuple[str, int, int], ...]) -> bytes:
    """sha256 of the folder's modules (listing: name, mtime, size of each: the cache key, so a
    file changed while the process runs is read again)."""
    digest = hashlib.sha256()
    for name, _, _ in listing:
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return digest.digest()


def _stamp_with_folder(self: Any) -> Any:
    stamp = _get_source_stamp(self)
    folder = Path(self._py_file).resolve().parent
    if not _shared_folder(folder):
        return stamp
    listing = tuple(
        (p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.py"))
    )
    return (stamp, _folder_digest(folder, listing))


_locator: Any = caching._SourceFileBackedLocatorMixin
_get_source_stamp = getattr(_locator.get_source_stamp, "__wrapped__", _locator.get_source_stamp)
_stamp_with_folder.__wrapped__ = _get_source_stamp  # type: ignore[attr-defined]
_locator.get_source_stamp = _stamp_with_folder
