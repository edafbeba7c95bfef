"""Every `kvforensics` command shown in a code block of README.md and docs/**/*.md runs as
written and ends with the exit code the page gives.

A command's exit code is documented by a comment on its line (`# exit code 1: findings`) or,
for a block that holds one command, by the paragraph right after the block ("exits with code
1"). Blocks marked `text` are output or synopses and are not run. Commands of one block run in
order in one folder, from the top of a copy of a workspace that holds:

- `data_samples/incident`: the sample incident; `case`: a copy of it (the guides' own case);
  `case-without-ledger`: the sample without its `kv_events/`;
- `out` and `out-without-ledger`: what `investigate` wrote for the first and the third, run once
  per session and shared (a command identical to one of these two is not run again).

Commands that need a GPU, a serving engine, a network service, a Ray cluster, the engines'
environment or minutes of benchmark are only parsed (an unknown option or a bad value still
fails); each such exception is listed in EXCEPTIONS with its reason. `scripts/*.sh` named in
the pages must exist."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.paths import REPO, SAMPLE

from forensics.cli import run
from forensics.cli.app import command
from forensics.cli.ray_option import optional_values

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELLS = {"", "bash", "sh", "shell", "console"}
SEPARATORS = re.compile(r"\s(?:&&|\|\||;|\|)\s")
COMMENT_CODE = re.compile(r"#\s*exit code (\d+)")
PROSE_CODE = re.compile(r"exits? with (?:exit )?code (\d+)|exit code (\d+)")
# Engines' environment kept out of the shared runs: investigate then judges nodes without a
# ledger by screening (its exit code is the same), and no run waits for the engines' driver.
NO_ENGINES = {"KVFORENSICS_ENGINES_VENV": "/nonexistent/kvforensics-engines"}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    expected: int | None


@dataclass
class Block:
    page: str
    line: int
    commands: list[Command] = field(default_factory=list)


def _ray_address(argv: tuple[str, ...]) -> bool:
    return any(
        a == "--ray" and i + 1 < len(argv) and ":" in argv[i + 1] for i, a in enumerate(argv)
    )


def _value(argv: tuple[str, ...], option: str) -> str | None:
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == option), None)


# (reason, which command lines): these are parsed, not run.
EXCEPTIONS: list[tuple[str, Callable[[tuple[str, ...]], bool]]] = [
    ("starts a serving engine (vLLM or SGLang) after --", lambda a: a[0] == "tap"),
    (
        "probes a live serving endpoint (its --dry-run runs: tests/probe/test_probe.py)",
        lambda a: a[0] == "probe" and "--dry-run" not in a,
    ),
    ("needs a running Ray cluster at the address given", _ray_address),
    (
        "reads a ledger from an object store (S3)",
        lambda a: any(x.startswith("s3://") for x in a),
    ),
    (
        "needs a GPU (CUDA)",
        lambda a: "cuda" in {_value(a, "--device"), _value(a, "--replay-device")},
    ),
    (
        "needs the served model's folder, which only the operator has",
        lambda a: any(x.startswith("/models/") for x in a),
    ),
    (
        "reconstruct drives the engines' real allocators: it needs the engines' environment "
        "(scripts/engines_venv.sh) and about 40 s to start their driver",
        lambda a: a[0] == "reconstruct",
    ),
    (
        "a benchmark of minutes (a million events or more)",
        lambda a: (
            a[0] == "bench" and "--replay" not in a and int(_value(a, "--events") or 0) >= 10**6
        ),
    ),
]


def _exception(argv: tuple[str, ...]) -> str | None:
    return next((reason for reason, applies in EXCEPTIONS if applies(argv)), None)


def _fences(text: str) -> Iterator[tuple[int, str, list[str], str]]:
    """(first line number, language, lines, the paragraph after the block) per fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = re.match(r"^```([\w-]*)", lines[i])
        if not opening:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        after = "\n".join(lines[i + 1 : i + 12]).strip().split("\n\n")[0]
        yield start + 1, opening.group(1), body, after
        i += 1


def _joined(body: list[str]) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined, with their offset in the block."""
    pending, first = "", 0
    for offset, line in enumerate(body):
        if not pending:
            first = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield first, pending + line
        pending = ""


def _commands_of(line: str) -> list[tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
    found = []
    for segment in SEPARATORS.split(line):
        words = shlex.split(segment, comments=True)
        env = []
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env.append((key, value))
        if words and (words[0] == "kvforensics" or words[0].endswith("/kvforensics")):
            found.append((tuple(words[1:]), tuple(env)))
    return found


def collect() -> list[Block]:
    blocks = []
    for page in PAGES:
        name = str(page.relative_to(REPO))
        for start, language, body, after in _fences(page.read_text(encoding="utf-8")):
            if language not in SHELLS:
                continue
            block = Block(name, start)
            for offset, line in _joined(body):
                marked = COMMENT_CODE.search(line)
                for argv, env in _commands_of(line):
                    code = int(marked.group(1)) if marked else None
                    block.commands.append(Command(name, start + offset, argv, env, code))
            if len(block.commands) == 1 and block.commands[0].expected is None:
                prose = PROSE_CODE.search(after)
                if prose:
                    only = block.commands[0]
                    code = int(prose.group(1) or prose.group(2))
                    block.commands[0] = Command(only.page, only.line, only.argv, only.env, code)
            if block.commands:
                blocks.append(block)
    return blocks


BLOCKS = collect()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _run_in(folder: Path, argv: tuple[str, ...], env: dict[str, str]) -> int:
    with contextlib.chdir(folder), _environment({**NO_ENGINES, **env}):
        return run(list(argv))


SHARED = {
    ("investigate", "data_samples/incident", "--out", "out"): None,
    ("investigate", "case-without-ledger", "--out", "out-without-ledger"): None,
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, ...], int]]:
    root = tmp_path_factory.mktemp("docs-workspace")
    shutil.copytree(SAMPLE, root / "data_samples" / "incident")
    shutil.copytree(SAMPLE, root / "case")
    shutil.copytree(
        SAMPLE, root / "case-without-ledger", ignore=shutil.ignore_patterns("kv_events")
    )
    codes = {argv: _run_in(root, argv, {}) for argv in SHARED}
    return root, codes


def test_every_page_command_is_found():
    """The collector sees the commands the pages show (an oracle of a few known lines)."""
    seen = {(c.page, c.argv) for b in BLOCKS for c in b.commands}
    quick_start = ("investigate", "data_samples/incident", "--out", "out")
    assert ("README.md", quick_start) in seen
    assert ("docs/get-started/install.md", quick_start) in seen
    assert any(argv[0] == "tap" for _, argv in seen)
    assert any(argv[0] == "audit-logs" for _, argv in seen)


def test_every_command_documents_an_exit_code_of_0_or_1():
    missing = [
        f"{c.page}:{c.line}: kvforensics {' '.join(c.argv)}"
        for b in BLOCKS
        for c in b.commands
        if _exception(c.argv) is None and c.expected not in (0, 1)
    ]
    assert not missing, "give these an exit code ('# exit code N'): " + "; ".join(missing)


def test_every_script_named_exists():
    named = {
        ref
        for page in PAGES
        for ref in re.findall(r"scripts/[\w.-]+\.sh\b", page.read_text(encoding="utf-8"))
    }
    assert "scripts/engines_venv.sh" in named
    assert not [ref for ref in sorted(named) if not (REPO / ref).is_file()]


def _parses(argv: tuple[str, ...]) -> None:
    """Parse a command line as kvforensics would, without running it: an unknown option, a
    missing argument or a bad value raises."""
    root = command()
    ctx = root.make_context("kvforensics", optional_values(list(argv)))
    protected = getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None)
    rest = [*(protected or []), *ctx.args]
    name, sub, args = root.resolve_command(ctx, rest)  # type: ignore[attr-defined]
    assert sub is not None and name == argv[0]
    parsed = sub.make_context(name, args, parent=ctx)
    if "--" in argv:  # tap passes on what follows `--`; every word before it must be its own
        passed = list(argv[argv.index("--") + 1 :])
        assert parsed.args == passed, f"not options of {name}: {parsed.args[: -len(passed)]}"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_the_commands_of_a_block_run_as_documented(block: Block, workspace, tmp_path):
    root, shared = workspace
    here = tmp_path / "ws"
    shutil.copytree(root, here)
    for cmd in block.commands:
        where = f"{cmd.page}:{cmd.line}: kvforensics {' '.join(cmd.argv)}"
        if _exception(cmd.argv) is not None:
            _parses(cmd.argv)
            continue
        if cmd.argv in shared and not cmd.env:
            code = shared[cmd.argv]
        else:
            code = _run_in(here, cmd.argv, dict(cmd.env))
        assert code == cmd.expected, f"{where}: exit code {code}, the page says {cmd.expected}"


def test_a_line_that_does_not_parse_fails():
    """The checks above can fail: an unknown option is refused by the parse-only check (also
    before a `--`, where tap would take it for the engine's command) and by a run (exit 2,
    never a documented 0 or 1)."""
    with pytest.raises(Exception, match="no-such-option"):
        _parses(("verify", "out", "--no-such-option"))
    with pytest.raises(AssertionError, match="no-such-option"):
        _parses(("tap", "vllm", "--no-such-option", "--", "true"))
    _parses(("tap", "vllm", "--dir", "x", "--", "vllm", "serve", "--port", "8000"))
    assert run(["verify", "out", "--no-such-option"]) == 2
