"""Node names from file names and the mapping file."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.logs.naming import classify, node_of, parse_name, read_node_map


@pytest.mark.parametrize(
    ("name", "node", "ranks", "rotation"),
    [
        ("prefill-0.log", "prefill-0", (), 0),
        ("prefill-0.log.gz", "prefill-0", (), 0),
        ("prefill-0.log.zst", "prefill-0", (), 0),
        ("prefill-0-tp1.log", "prefill-0", (("TP", 1),), 0),
        ("decode_3_dp1_tp3.log.gz", "decode_3", (("DP", 1), ("TP", 3)), 0),
        ("node-a.rank2.log", "node-a", (("RANK", 2),), 0),
        ("prefill-0.log.1", "prefill-0", (), 1),
        ("prefill-0.log.2.gz", "prefill-0", (), 2),
        ("prefill-0.2026-08-27.log", "prefill-0", (), 0),
        ("gpu-box-7.txt", "gpu-box-7", (), 0),
        ("weird name", "weird name", (), 0),
    ],
)
def test_file_name_rule(name, node, ranks, rotation):
    stem, got_ranks, got_rotation = parse_name(name)
    assert (stem, got_ranks, got_rotation) == (node, ranks, rotation)
    assert node_of(name, [])[0] == node


def test_generic_names_take_the_folder():
    assert node_of("decode-1/tp0.log", []) == ("decode-1", (("TP", 0),), 0)
    assert node_of("prefill-2/server.log.gz", [])[0] == "prefill-2"
    assert node_of("prefill-2/sglang-tp1.log", [])[0] == "prefill-2"


def test_node_map_first_match_wins(tmp_path):
    mapping = tmp_path / "map.csv"
    mapping.write_text("node,file_glob\nprefill-east-0,host-17*\ncatch-all,*.log\n")
    rows = read_node_map(mapping)
    assert node_of("host-17-tp1.log", rows) == ("prefill-east-0", (("TP", 1),), 0)
    assert node_of("sub/host-17.log", rows)[0] == "prefill-east-0"  # bare name matches too
    assert node_of("other.log", rows)[0] == "catch-all"
    assert node_of("other.txt", rows)[0] == "other"  # no row: the file name rule


def test_bad_node_map(tmp_path):
    mapping = tmp_path / "map.csv"
    mapping.write_text("name,pattern\na,b\n")
    with pytest.raises(InputError, match="node,file_glob"):
        read_node_map(mapping)
    with pytest.raises(InputError, match="cannot read"):
        read_node_map(tmp_path / "absent.csv")


def test_reading_order_oldest_rotation_first():
    names = ["n-tp1.log", "n-tp0.log", "n-tp0.log.2.gz", "n-tp0.log.1", "a.log"]
    files = classify([(Path(n), n, n) for n in names], [])
    assert [f.rel for f in files] == [
        "a.log",
        "n-tp0.log.2.gz",
        "n-tp0.log.1",
        "n-tp0.log",
        "n-tp1.log",
    ]
