"""Write the echo test model (forensics.replay.echomodel) as a Hugging Face model folder:

    python scripts/build_echo_model.py FOLDER

The weights are constructed, not trained: the same bytes every time (numpy, seeded, float32);
some 4 s on one core. Prints the folder, the SHA-256 of model.safetensors and the
figures the construction guarantees (position margin, largest cosine between token codes)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from forensics.replay import echomodel


def main() -> None:
    folder = echomodel.save_echo_model(Path(sys.argv[1]))
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    gap = min(echomodel.position_gap(1), echomodel.position_gap(2))
    print(f"{folder}: model.safetensors SHA-256 {digest}")
    print(
        f"position margin {echomodel.POSITION_MARGIN:g} logits (unscaled gap {gap:.3f}); "
        f"largest cosine between token codes {echomodel.coherence(echomodel.token_codes()):.3f}"
    )


if __name__ == "__main__":
    main()
