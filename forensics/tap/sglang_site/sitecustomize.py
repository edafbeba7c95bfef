"""Started by `kvforensics tap sglang`: patch SGLang's KV memory classes in every Python process
of the server (scheduler processes included) before SGLang runs."""

import os
import sys

if os.environ.get("KVFORENSICS_TAP_DIR"):
    try:
        from forensics.tap.sglang_patch import install

        install()
    except Exception as exc:  # the server must start even when the tap cannot
        print(f"kvforensics tap: not recording in this process: {exc!r}", file=sys.stderr)
