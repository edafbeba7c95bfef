"""The notice templates: the package's (templates/notice_{side}.{md,html}), or an examiner's own
from `--templates DIR`, where a file of the same name overrides the package's (partials such
as _notice_base.html too).

The fields a notice must show are those the package's template of the same name renders
(account id and name, the counts, dates, notify_by, the confidence, the requests...): they are
read from the package template itself, with what it extends and includes, so there is one list
and it follows the templates. A custom template that leaves one out is refused before anything
is written, naming the file and the field (exit 2). Templates run in jinja2's sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from forensics.base.hashing import sha256_file
from forensics.casedb.resources import resource_dir
from forensics.errors import UsageError

SIDES = ("receiving", "leaking")
KINDS = ("md", "html")
NOTICE_TEMPLATES = tuple(f"notice_{side}.{kind}" for side in SIDES for kind in KINDS)
# The variables a notice template is given (forensics.notify.notices.Notice).
TOP_FIELDS = frozenset({"side", "account", "requests", "confidence_text", "sender"})


def package_dir() -> Path:
    return resource_dir("templates")


def loader(custom: Path | None) -> jinja2.BaseLoader:
    """Templates from `custom` first, then the package's."""
    package = jinja2.FileSystemLoader(str(package_dir()))
    if custom is None:
        return package
    return jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(custom)), package])


def _parsed(env: jinja2.Environment, name: str) -> Iterator[nodes.Template]:
    """The template `name` and every template it extends, includes or imports, parsed."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        source, _, _ = env.loader.get_source(env, current)  # type: ignore[union-attr]
        tree = env.parse(source)
        yield tree
        todo += [n for n in meta.find_referenced_templates(tree) if isinstance(n, str)]


def fields_used(env: jinja2.Environment, name: str) -> set[str]:
    """The notice fields template `name` renders: top-level variables (`confidence_text`) and
    attributes of `account` and of each request (`account.notify_by`, `requests[].request_id`)."""
    used: set[str] = set()
    for tree in _parsed(env, name):
        alias = {"account": "account"}
        for loop in tree.find_all(nodes.For):
            if isinstance(loop.iter, nodes.Name) and isinstance(loop.target, nodes.Name):
                alias[loop.target.name] = f"{loop.iter.name}[]"
        for var in tree.find_all(nodes.Name):
            if var.name in TOP_FIELDS and var.name != "account":
                used.add(var.name)
        for attr in tree.find_all(nodes.Getattr):
            if isinstance(attr.node, nodes.Name) and attr.node.name in alias:
                used.add(f"{alias[attr.node.name]}.{attr.attr}")
    return used


def required_fields(name: str) -> set[str]:
    """What the package's template `name` renders: what a custom one must render too."""
    return fields_used(jinja2.Environment(loader=loader(None)), name)


def check_templates(custom: Path | None) -> dict[str, dict[str, str]]:
    """Check a --templates folder; return, per notice template, where it comes from and its
    SHA-256 (what the manifest records). UsageError naming the file and the missing fields."""
    record: dict[str, dict[str, str]] = {}
    if custom is not None and not custom.is_dir():
        raise UsageError(f"--templates {custom}: not a folder; give the folder of notice_*.html/md")
    env = jinja2.Environment(loader=loader(custom))
    for name in NOTICE_TEMPLATES:
        own = custom / name if custom is not None else None
        path = own if own is not None and own.is_file() else package_dir() / name
        try:
            used = fields_used(env, name)
        except jinja2.TemplateError as exc:
            raise UsageError(f"{path}: not a valid template ({exc}); fix it or remove it") from exc
        missing = sorted(required_fields(name) - used)
        if missing:
            raise UsageError(
                f"{path} does not show every field a notice must carry: missing "
                f"{', '.join(missing)} (the package's {name} shows them; add them, or remove "
                "the file to use the package's)"
            )
        record[name] = {
            "source": "custom" if path == own else "package",
            "sha256": sha256_file(path),
        }
    return record


def sandbox(custom: Path | None, *, html: bool) -> SandboxedEnvironment:
    """A sandboxed jinja2 environment over the custom folder and the package's templates;
    autoescape for HTML."""
    return SandboxedEnvironment(
        loader=loader(custom),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
