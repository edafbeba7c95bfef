"""Per-account notices, Markdown and HTML, one set per side:
OUT/notifications/notices/{receiving,leaking}/<account>.{md,html}.

Templates: templates/notice_{side}.{md,html} (jinja2). HTML is autoescaped; in Markdown every
value is HTML-escaped as well, because Markdown renderers pass raw HTML through. A notice names
only the account's own requests, never a counterpart."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import escape

from forensics.notify.exports import SIDES, Exports
from forensics.resources import resource_dir

CONFIDENCE_WORDS = {
    "confirmed": "confirmed: we re-ran the affected response and reproduced it from the mixed-up "
    "memory, and not without it",
    "ledger": "established from the serving engine's own memory records",
    "reconstructed": "reconstructed: no memory record covers the server involved, so we rebuilt "
    "its memory use from our request records with the engine's own allocator; the finding "
    "holds unless the server acted in an order our records do not show",
    "possible": "possible: the request matches the pattern of the fault, but no memory record "
    "covers it, so we cannot rule it in or out",
}


@dataclass(frozen=True)
class Notice:
    """What a notice template may use (documented for the template field test)."""

    side: str
    account: dict[str, Any]
    requests: list[dict[str, Any]]
    confidence_text: str
    sender: str


NOTICE_FIELDS = {"side", "account", "requests", "confidence_text", "sender"}


def human_time(value: str | None) -> str:
    """'2026-08-27T10:00:01.000200Z' as '27 August 2026, 10:00 UTC' (minutes, for people)."""
    if not value:
        return "an unknown time"
    moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    return f"{moment.day} {moment:%B %Y, %H:%M} UTC"


def _md_finalize(value: Any) -> Any:
    return "" if value is None else str(escape(value)).replace("|", "\\|")


@cache
def environment(kind: str) -> jinja2.Environment:
    """The jinja2 environment for 'html' (autoescape) or 'md' (values HTML-escaped)."""
    loader = jinja2.FileSystemLoader(str(resource_dir("templates")))
    if kind == "html":
        env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                 keep_trailing_newline=True)
    else:
        env = jinja2.Environment(loader=loader, autoescape=False, finalize=_md_finalize,
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["human"] = human_time
    return env


def file_stem(account_id: str) -> str:
    """A safe, stable file name for an account id (a hash suffix when characters were replaced)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", account_id)[:60].lstrip(".") or "account"
    if safe == account_id:
        return safe
    return f"{safe}-{hashlib.sha256(account_id.encode('utf-8')).hexdigest()[:10]}"


def notices_for(exports: Exports, sender: str) -> list[Notice]:
    """One notice per (side, account), accounts in id order."""
    by_side = {"receiving": exports.receiving_accounts, "leaking": exports.leaking_accounts}
    out = []
    for side in SIDES:
        for account in by_side[side]:
            own = [r for r in exports.affected_requests
                   if r["side"] == side and r["account_id"] == account["account_id"]]
            words = CONFIDENCE_WORDS.get(account["confidence"], account["confidence"])
            out.append(Notice(side, account, own, words, sender))
    return out


def render_notice(notice: Notice, kind: str) -> str:
    template = environment(kind).get_template(f"notice_{notice.side}.{kind}")
    return template.render(**{name: getattr(notice, name) for name in NOTICE_FIELDS})


def write_notices(exports: Exports, out_dir: Path, sender: str) -> list[Path]:
    """Render every notice as Markdown and HTML under out_dir/<side>/; return the paths."""
    written = []
    for notice in notices_for(exports, sender):
        folder = out_dir / notice.side
        folder.mkdir(parents=True, exist_ok=True)
        stem = file_stem(str(notice.account["account_id"]))
        for kind in ("md", "html"):
            path = folder / f"{stem}.{kind}"
            path.write_text(render_notice(notice, kind), encoding="utf-8")
            written.append(path)
    return written
