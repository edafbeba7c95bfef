"""Every field the templates use is declared in the documented context (forensics.report.context
and its row types in forensics.report.rows for report.html and its partials,
forensics.notify.notices.Notice for the notices)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import jinja2
from jinja2 import meta, nodes

from forensics.casedb.resources import resource_dir
from forensics.notify.notices import NOTICE_FIELDS, Notice
from forensics.notify.notices import environment as notice_environment
from forensics.report.context import ReportContext
from forensics.report.render import environment

TEMPLATES = resource_dir("templates")
REPORT_TEMPLATES = ["report.html"] + sorted(
    p.name for p in TEMPLATES.glob("_*.html") if not p.name.startswith("_notice")
)


def _element(kind: Any) -> Any:
    """list[T] -> T; Optional[T] -> T."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if args else kind


def _field_type(owner: Any, name: str) -> Any:
    assert dataclasses.is_dataclass(owner), f"{owner} has no fields (looking up '{name}')"
    hints = typing.get_type_hints(owner)
    assert name in hints, f"'{name}' is not a documented field of {owner.__name__}"
    return _element(hints[name]) if typing.get_origin(hints[name]) is not list else hints[name]


def _resolve(node: nodes.Node, scope: dict[str, Any]) -> Any:
    """The declared type of an expression `r.a.b` / `loopvar.c` (None when not a field path)."""
    if isinstance(node, nodes.Name):
        return scope.get(node.name)
    if isinstance(node, nodes.Getattr):
        owner = _resolve(node.node, scope)
        if owner is None or owner in (str, int, float, bool) or typing.get_origin(owner) is list:
            return None
        return _field_type(owner, node.attr)
    if isinstance(node, nodes.Getitem):
        owner = _resolve(node.node, scope)
        if typing.get_origin(owner) is list and not isinstance(node.arg, nodes.Slice):
            return typing.get_args(owner)[0]  # r.rows[0] -> the row type
        return owner
    if isinstance(node, nodes.Filter):
        return _resolve(node.node, scope)
    return None


def _check(node: nodes.Node, scope: dict[str, Any], used: list[str]) -> None:
    if isinstance(node, nodes.For):
        iterated = _resolve(node.iter, scope)
        inner = dict(scope)
        if iterated is not None and isinstance(node.target, nodes.Name):
            inner[node.target.name] = typing.get_args(iterated)[0]
        _check(node.iter, scope, used)
        for child in node.body + node.else_:
            _check(child, inner, used)
        return
    if isinstance(node, nodes.Assign) and isinstance(node.target, nodes.Name):
        _check(node.node, scope, used)
        value = _resolve(node.node, scope)
        if value is not None:
            scope[node.target.name] = value
        return
    if isinstance(node, nodes.Getattr) and _resolve(node.node, scope) is not None:
        _resolve(node, scope)  # raises when the field is not declared
        used.append(node.attr)
    for child in node.iter_child_nodes():
        _check(child, scope, used)


def _parse(name: str) -> nodes.Template:
    env = environment()  # the report's environment, with its filters
    source = (TEMPLATES / name).read_text(encoding="utf-8")
    return env.parse(source)


def test_report_templates_use_only_documented_fields() -> None:
    used: list[str] = []
    for name in REPORT_TEMPLATES:
        tree = _parse(name)
        assert meta.find_undeclared_variables(tree) <= {"r"}, name
        _check(tree, {"r": ReportContext}, used)
    assert {"headline", "cross_tokens", "pool_slots", "sha256", "total"} <= set(used)


def test_every_partial_is_included() -> None:
    included = set()
    for name in REPORT_TEMPLATES:
        included |= set(meta.find_referenced_templates(_parse(name)))
    assert included == set(REPORT_TEMPLATES) - {"report.html"}


def test_notice_templates_use_only_documented_fields() -> None:
    assert NOTICE_FIELDS == {f.name for f in dataclasses.fields(Notice)}
    for path in sorted(TEMPLATES.glob("notice_*")) + sorted(TEMPLATES.glob("_notice*")):
        tree = notice_environment("html").parse((TEMPLATES / path.name).read_text())
        assert meta.find_undeclared_variables(tree) <= NOTICE_FIELDS | {"self"}, path.name


def test_checker_rejects_an_undocumented_field() -> None:
    tree = jinja2.Environment().parse("{% for n in r.nodes %}{{ n.pool_size }}{% endfor %}")
    try:
        _check(tree, {"r": ReportContext}, [])
    except AssertionError as exc:
        assert "pool_size" in str(exc)
    else:
        raise AssertionError("an undeclared field went unnoticed")
