"""A two-request case for the output-folder tests (B reads what A wrote), and the cli fixture
with its messages unwrapped."""

from __future__ import annotations

from pathlib import Path

REQ = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
EV = "ts,node,request_id,op,slot_start,slot_count,pos_start,source\n"
ACC = "account_id,name,contact_email,jurisdiction\n"


def flat(cli):
    """The cli fixture with stderr unwrapped (messages are wrapped to the terminal width)."""

    def run(*args):
        code, out, err = cli(*args)
        return code, out, " ".join(err.split())

    return run


def write_case(root: Path, receiver_account: str) -> Path:
    """A writes slots 0-3 and frees them; B (receiver_account) reads them: B received A's data."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "requests.csv").write_text(
        REQ + "A,acct-1,m,2026-08-27T10:00:00Z,200,4\n"
        f"B,{receiver_account},m,2026-08-27T10:00:05Z,200,4\n"
    )
    (root / "kv_events.csv").write_text(
        EV + "2026-08-27T10:00:00Z,n1,A,alloc,0,4,,\n"
        "2026-08-27T10:00:01Z,n1,A,write,0,4,0,prefill\n"
        "2026-08-27T10:00:02Z,n1,A,free,0,4,,\n2026-08-27T10:00:05Z,n1,B,alloc,0,4,,\n"
        "2026-08-27T10:00:06Z,n1,B,read,0,4,0,\n"
    )
    (root / "accounts.csv").write_text(
        ACC + f"acct-1,One,one@x,EU\n{receiver_account},Two,two@x,EU\n"
    )
    return root
