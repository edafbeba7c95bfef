"""Whole runs: `investigate` (every stage in order, the output folder, the manifest) and
`verify` (an output folder against its manifest)."""
