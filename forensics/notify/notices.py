"""Per-account notices, Markdown and HTML, one set per side:
OUT/notifications/notices/{receiving,leaking}/<account>.{md,html}.

Templates: templates/notice_{side}.{md,html} (jinja2). HTML is autoescaped; in Markdown every
value is escaped as Markdown text (forensics.base.textsafe.markdown_text: one line, no links,
emphasis or raw HTML); in both, control characters are shown as escapes. A notice names
only the account's own requests, never a counterpart."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from forensics.analysis.evidence import Confidence
from forensics.base.isotime import parse_iso
from forensics.base.textsafe import html_value, markdown_text
from forensics.errors import UsageError
from forensics.notify.exports import SIDES, Exports
from forensics.notify.templates import sandbox

CONFIDENCE_WORDS: dict[str, str] = {
    Confidence.CONFIRMED: (
        "confirmed: we re-ran the affected response and reproduced it from the mixed-up "
        "memory, and not without it"
    ),
    Confidence.LEDGER: "established from the serving engine's own memory records",
    Confidence.RECONSTRUCTED: (
        "reconstructed: no memory record covers the server involved, so we rebuilt "
        "its memory use from our request records with the engine's own allocator; the finding "
        "holds unless the server acted in an order our records do not show"
    ),
    Confidence.POSSIBLE: (
        "possible: the request matches the pattern of the fault, but no memory record "
        "covers it, so we cannot rule it in or out"
    ),
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
        return _Text("an unknown time")
    moment = parse_iso(value).astimezone(UTC)
    return _Text(f"{moment.day} {moment:%B %Y, %H:%M} UTC")


class _Text(str):
    """Text the notice code wrote itself (a formatted time): not escaped again."""


def _md_finalize(value: Any) -> Any:
    if value is None:
        return ""
    return value if isinstance(value, _Text) else markdown_text(value)


@cache
def environment(kind: str, custom: Path | None = None) -> jinja2.Environment:
    """The sandboxed jinja2 environment for 'html' (autoescape) or 'md' (values escaped as
    Markdown text), over the templates of `custom` (--templates) and then the package's."""
    env = sandbox(custom, html=kind == "html")
    env.finalize = html_value if kind == "html" else _md_finalize
    env.filters["human"] = human_time
    return env


_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,60}")
_LOOKS_HASHED = re.compile(r".*-[0-9a-f]{10,}", re.IGNORECASE)
RESERVED_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
)


def _hashed_stem(account_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", account_id)[:60] or "account"
    return f"{safe}-{hashlib.sha256(account_id.encode('utf-8')).hexdigest()[:16]}"


def file_stems(account_ids: list[str]) -> dict[str, str]:
    """A file name stem per account id, unique even on case-insensitive file systems.

    An id is its own stem only when it is plain (letters, digits, '_', '-'; at most 60), is no
    reserved device name (CON, NUL, COM1, ...), does not end like a hashed stem ('-' and 10 or
    more hex digits) and no other id of the list equals it apart from case. Every other id gets
    its characters replaced and the first 16 hex digits of its SHA-256 appended, so no hashed
    stem can equal a plain one and two hashed stems differ unless the ids do."""
    plain = [
        a
        for a in account_ids
        if _PLAIN.fullmatch(a)
        and not _LOOKS_HASHED.fullmatch(a)
        and a.upper() not in RESERVED_NAMES
    ]
    folded: dict[str, int] = {}
    for a in set(plain):
        folded[a.lower()] = folded.get(a.lower(), 0) + 1
    own = {a for a in plain if folded[a.lower()] == 1}
    return {a: a if a in own else _hashed_stem(a) for a in account_ids}


def notices_for(exports: Exports, sender: str) -> list[Notice]:
    """One notice per (side, account), accounts in id order."""
    by_side = {"receiving": exports.receiving_accounts, "leaking": exports.leaking_accounts}
    out = []
    for side in SIDES:
        for account in by_side[side]:
            own = [
                r
                for r in exports.affected_requests
                if r["side"] == side and r["account_id"] == account["account_id"]
            ]
            words = CONFIDENCE_WORDS.get(account["confidence"], account["confidence"])
            out.append(Notice(side, account, own, words, sender))
    return out


def render_notice(notice: Notice, kind: str, custom: Path | None = None) -> str:
    """A notice as text; a template that the sandbox stops (it reached for Python internals)
    or that fails on the notice's values is named in a UsageError."""
    name = f"notice_{notice.side}.{kind}"
    template = environment(kind, custom).get_template(name)
    try:
        return template.render(**{field: getattr(notice, field) for field in NOTICE_FIELDS})
    except jinja2.TemplateError as exc:
        where = template.filename or name
        raise UsageError(f"{where}: the notice template failed ({exc}); fix or remove it") from exc


def write_notices(
    exports: Exports, out_dir: Path, sender: str, custom: Path | None = None
) -> list[Path]:
    """Render every notice as Markdown and HTML under out_dir/<side>/ (templates of `custom`
    first, checked by forensics.notify.templates.check_templates); return the paths."""
    written = []
    notices = notices_for(exports, sender)
    stems = {
        side: file_stems([str(n.account["account_id"]) for n in notices if n.side == side])
        for side in SIDES
    }
    for notice in notices:
        folder = out_dir / notice.side
        folder.mkdir(parents=True, exist_ok=True)
        stem = stems[notice.side][str(notice.account["account_id"])]
        for kind in ("md", "html"):
            path = folder / f"{stem}.{kind}"
            path.write_text(render_notice(notice, kind, custom), encoding="utf-8")
            written.append(path)
    return written
