"""Integer codes shared by the compiled sweep and the SQL that decodes its pieces.

Each code is the index in its tuple. The SQL decodes codes with these tuples bound as list
parameters ($ops, $exposure_kinds, $violations: see code_lists), never with copies of them. The
compiled kernels see only the integer codes; the names of the exposure kinds are ExposureKind's."""

from __future__ import annotations

from enum import StrEnum

from forensics.case.contract import OPS  # code = index = op rank

FREE, ALLOC, SHARE, WRITE, READ = 0, 1, 2, 3, 4


class ExposureKind(StrEnum):
    """How a read met another request's data (exposures.kind), in code order."""

    STALE = "stale"  # left behind by a request that no longer held the slot
    OVERWRITTEN = "overwritten"  # another request wrote into a slot the reader held
    PREFIX_MISMATCH = "prefix-mismatch"  # a prefix-cache hit whose content was not the prefix


# plain strings: the tuple is bound as a SQL list parameter
EXPOSURE_KINDS = tuple(kind.value for kind in ExposureKind)
STALE, OVERWRITTEN, PREFIX_MISMATCH = 0, 1, 2

CATEGORIES = ("own", "shared_verified", "shared_unverified", "foreign", "uninitialised")
OWN, SHARED_VERIFIED, SHARED_UNVERIFIED, FOREIGN, UNINITIALISED = 0, 1, 2, 3, 4

VIOLATIONS = ("write-after-free", "write-unheld", "double-allocation", "read-unheld")
WRITE_AFTER_FREE, WRITE_UNHELD, DOUBLE_ALLOCATION, READ_UNHELD = 0, 1, 2, 3


def code_lists() -> dict[str, list[str]]:
    """The tuples as the list parameters the SQL names them by."""
    return {
        "ops": list(OPS),
        "exposure_kinds": list(EXPOSURE_KINDS),
        "violations": list(VIOLATIONS),
    }
