"""What the tests share apart from fixtures (which stay in tests/conftest.py): paths, small case
folders, case databases built from rows, the naive oracle, hypothesis strategies, and harnesses
for real engines, Ray clusters, browsers and small disks. Import a module of it by name
(`from support.paths import REPO`); pytest puts tests/ on sys.path (pyproject's pythonpath)."""
