"""The way an SGLang release puts freed pages back (forensics/reconstruct/freelist.py),
against what the released packages do: the boundaries read from their allocator.py, and the
installed release's own rule for building the allocator."""

from __future__ import annotations

import subprocess

import pytest
from support.engines import engines_python

from forensics.options import FreeList
from forensics.reconstruct.freelist import release_free_list, version_key

STAGED, FRONT, BACK = FreeList.STAGED, FreeList.FRONT, FreeList.BACK


@pytest.mark.parametrize(
    ("version", "decode_16", "decode_1", "unified_16"),
    [
        ("0.4.8", FRONT, BACK, FRONT),  # free(): cat((freed, free_pages)) / cat((free, freed))
        ("0.4.9.post3", FRONT, BACK, FRONT),
        ("0.4.9.post4", STAGED, STAGED, STAGED),  # release_pages on every node
        ("0.4.10.post2", STAGED, STAGED, STAGED),
        ("0.5.0rc1", STAGED, STAGED, STAGED),
        ("0.5.0rc2", STAGED, STAGED, FRONT),  # need_sort: disaggregated nodes only
        ("0.5.9", STAGED, STAGED, FRONT),
        ("v0.5.23+cu129", STAGED, STAGED, FRONT),
    ],
)
def test_each_release_frees_as_its_allocator_does(version, decode_16, decode_1, unified_16):
    assert release_free_list(version, "decode", 16) is decode_16
    assert release_free_list(version, "prefill", 16) is decode_16
    assert release_free_list(version, "decode", 1) is decode_1
    assert release_free_list(version, "unified", 16) is unified_16
    assert release_free_list(version, "unified", 1) is (BACK if unified_16 is FRONT else STAGED)


@pytest.mark.parametrize("version", [None, "", "latest", "0.5.x", "sglang-0.5.9"])
def test_a_version_that_is_not_one_names_no_way(version):
    assert release_free_list(version, "decode", 16) is None


def test_versions_order_as_releases_do():
    order = ["0.4.9.dev1", "0.4.9rc1", "0.4.9", "0.4.9.post1", "0.4.10", "0.5", "0.5.0.post1"]
    keys = [version_key(v) for v in order]
    assert None not in keys
    assert keys == sorted(keys)  # type: ignore[type-var]


def test_the_installed_release_builds_need_sort_for_disaggregated_nodes_only():
    """The installed SGLang's own rule: the allocator is built with need_sort exactly on a
    disaggregated prefill or decode node; the table says the same for its version."""
    code = (  # read, not imported: the module needs the server's dependencies
        "import pathlib, sglang; print(sglang.__version__); print(pathlib.Path(sglang.__file__)"
        ".parent.joinpath('srt/mem_cache/kv_cache_configurator.py').read_text())"
    )
    out = subprocess.run(
        [str(engines_python()), "-c", code], capture_output=True, text=True, check=True
    ).stdout
    version, source = out.split("\n", 1)
    assert 'need_sort=get_disagg().disaggregation_mode in ("decode", "prefill")' in source
    assert release_free_list(version, "decode", 16) is STAGED
    assert release_free_list(version, "unified", 16) is FRONT
