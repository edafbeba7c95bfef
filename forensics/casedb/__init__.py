"""The case database's plumbing: SQL from queries/ loaded by name, opening a database with the
project's settings, scratch databases, schema comments, spill folders, the resource folders,
interrupt handling, the empty stand-in tables."""
