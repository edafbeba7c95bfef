"""The base layer: helpers every layer may use and that use nothing of the project but
forensics.errors (Arrow tables, hashing, safe text, ISO times, the garbage collector's pause,
progress callbacks, Ray tasks, signing, the run manifest, numba's cache)."""
