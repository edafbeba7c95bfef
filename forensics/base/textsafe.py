"""Making values safe where they are shown: CSV cells, HTML and Markdown.

- CSV: a text cell has its backslashes doubled and its control characters (C0 controls but TAB,
  LF and CR included, DEL, C1 controls) and bidirectional marks, embeddings, overrides and
  isolates written as escapes (\\n, \\r, \\u202e: csv_text), so that a record is one line and
  a value cannot reorder or hide the cells around it; then a cell that a spreadsheet would run
  as a formula (its first character after any leading spaces is =, +, -, @ or TAB) gets a
  leading apostrophe. The SQL macro `kvf_csv_cell` (queries/schema/macros.sql) applies the same
  rule to the CSV files written by DuckDB; a field holding a comma or a quote is quoted.
- HTML and Markdown: control characters (C0/C1 controls such as NUL, and the bidirectional
  overrides and isolates U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) are shown as
  escapes (\\n, \\u202e), so a value cannot reorder or hide the text around it.
- Markdown: the characters that make links, emphasis, code, tables or HTML are escaped.
- Terminal: every control character but LF and TAB (an escape sequence, a bell, a carriage
  return that would overwrite the line) and the bidirectional marks are shown as escapes
  (terminal_text); a name shown inside a line also has its LF and TAB escaped (visible with
  keep_newlines=False), so it cannot start a line of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import IO, Any

_FORMULA = re.compile(r"^[ ]*[=+\-@\t]")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROL_HTML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + _BIDI + "]")
_CONTROL_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "]")
# U+2028 and U+2029 end a line in some viewers: a CSV record stays one line.
_CONTROL_CSV = re.compile("[\\\\\x00-\x08\x0a-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~{}])")
_MD_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _escape_csv(match: re.Match[str]) -> str:
    char = match.group(0)
    return "\\\\" if char == "\\" else _escape_control(match)


def csv_text(text: str) -> str:
    """Text with backslashes doubled and controls (TAB aside) and bidirectional-format
    characters written as escapes (\\n, \\r, \\u202e), as kvf_csv_text does in SQL."""
    return _CONTROL_CSV.sub(_escape_csv, text)


def csv_cell(value: Any) -> Any:
    """A CSV text cell escaped (csv_text) with formula-looking text neutralised (None becomes
    empty); other values are left as they are."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    text = csv_text(value)
    return "'" + text if _FORMULA.match(text) else text


def _field(value: Any) -> str:
    text = "" if value is None else str(value)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def write_csv_rows(handle: IO[str], rows: Iterable[Iterable[Any]]) -> None:
    """Write RFC 4180 records ending in LF; every text cell goes through csv_cell."""
    for row in rows:
        handle.write(",".join(_field(csv_cell(v)) for v in row) + "\n")


def _escape_control(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or f"\\u{ord(char):04x}"


def visible(text: str, *, keep_newlines: bool = True) -> str:
    """Control and bidirectional-format characters shown as escapes; with keep_newlines, LF,
    CR and TAB stay (HTML shows them as spaces)."""
    pattern = _CONTROL_HTML if keep_newlines else _CONTROL_ALL
    return pattern.sub(_escape_control, text)


def terminal_text(text: str) -> str:
    """Text as a terminal may receive it: controls other than LF and TAB (ESC, BEL, CR, C1)
    and bidirectional-format characters shown as escapes."""
    return _CONTROL_TERMINAL.sub(_escape_control, text)


def markdown_text(value: Any) -> str:
    """A value as inert Markdown text on one line: controls (newlines included) shown as
    escapes, Markdown punctuation backslash-escaped, < > & as entities."""
    text = visible(str(value), keep_newlines=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "".join(_MD_HTML.get(c, c) for c in text)


def html_value(value: Any) -> Any:
    """jinja finalize for HTML: plain text gets its controls shown; markup is left alone."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return visible(value)
    return value


def json_value(text: str) -> Any:
    """json.loads, where a value nested deeper than the parser can follow is a ValueError like
    any other malformed JSON (json raises RecursionError for it)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deep to be read") from None
