"""Where things are: the repository, the tests, their data and golden files."""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO = TESTS_DIR.parent
DATA = TESTS_DIR / "data"  # inputs the tests read (logs, examples, reference SQL)
GOLDEN = TESTS_DIR / "golden"  # outputs reviewed by a person, compared byte for byte
EXAMPLES = DATA / "examples"  # the worked examples of docs/DESIGN.md §4
SAMPLE = REPO / "data_samples" / "incident"  # the sample incident the guides use
