"""`kvforensics verify`: check OUT and the case folder against OUT/manifest.json."""

from __future__ import annotations

from forensics.base.textsafe import visible
from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import Json, MovedCase, PubKey, VerifyOut
from forensics.run.verify import verify as run_verify


@app.command()
def verify(
    out: VerifyOut, case: MovedCase = None, pubkey: PubKey = None, json_out: Json = False
) -> None:
    """Re-hash every input and output the manifest lists: exit 0 when all match, 1 listing
    what differs (changed, missing, or not in the manifest; with --pubkey, a signature
    missing or not made by that key)."""
    result = run_verify(out, case, pubkey)
    if json_out:
        emit_json(result.to_json())
    else:
        for d in result.differences:
            shown = visible(d.path, keep_newlines=False)  # a file anyone may have put in OUT
            console.print(f"{d.side} {shown}: {d.why}", markup=False)
        state = (
            "all match" if not result.differences else (f"{len(result.differences)} difference(s)")
        )
        if result.signature:
            console.print(f"signature: {result.signature}", markup=False)
        console.print(
            f"verify: {result.checked} file(s) checked against the manifest; {state}", markup=False
        )
    finish(bool(result.differences))
