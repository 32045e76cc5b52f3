"""The docs hold what they show.

- Every relative link in README.md, BENCHMARKS.md and docs/ resolves: the file
  exists and, for a ``#anchor`` into a Markdown page, a heading makes it.
- Every command of this project a shell block shows parses: ``python -m
  vehicle_middleware.X SUB ...`` (and the console scripts ``vehicle-middleware``,
  ``vehicle-middleware-telemetry-export``,
  ``vehicle-middleware-tools``) names subcommands that exist, and every ``--flag`` it gives
  is in that command's ``--help``; ``make TARGET`` names a target of the
  Makefile.
- Every fenced block is shell commands (``sh``), text (no language, or
  ``text``: what a program prints, a picture, a session at another program's
  prompt), or an excerpt of a file under ``examples/`` that a test runs: its
  first line ``# examples/PATH (excerpt)``, its other lines (but blank ones and
  ``...``) lines of that file, in their order. A block of shell or text that
  holds Python statements fails, and so does every other block (``python``,
  ``toml``, ...) without its label (docs/contributing.md, "Code in the docs").
- Every file under ``examples/`` is named by a test that runs it.

Each case is named by its file and line. The ``--help`` outputs are fetched
once each, in parallel.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_BLOCKS = {"sh", "bash", "console", "shell"}
SCRIPTS = {
    "vehicle-middleware": "vehicle_middleware.server",
    "vehicle-middleware-telemetry-export": "vehicle_middleware.telemetry_export",
    "vehicle-middleware-tools": "vehicle_middleware.tools",
}

_FENCE = re.compile(r"^```(\S*)\s*$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_PYTHON_M = re.compile(r"(?:^|[\s(=])(?:\S*/)?python3?\s+-m\s+(vehicle_middleware(?:\.\w+)+)(.*)")
_SCRIPT = re.compile(
    r"(?:^|[\s(=])(?:\S*/)?(" + "|".join(map(re.escape, SCRIPTS)) + r")(?![\w-])(.*)"
)
_MAKE = re.compile(r"^make\s+(.*)")
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- reading Markdown ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A fenced block: its info string, first line number (1-based) and lines."""

    info: str
    line: int
    lines: tuple[str, ...]


def _blocks(path: Path) -> list[Block]:
    blocks: list[Block] = []
    info: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = _FENCE.match(line)
        if info is None and fence:
            info, start, body = fence.group(1), number + 1, []
        elif info is not None and line.rstrip() == "```":
            blocks.append(Block(info, start, tuple(body)))
            info = None
        elif info is not None:
            body.append(line)
    return blocks


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """The lines outside fenced blocks, numbered, with inline code removed."""
    inside = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if _FENCE.match(line) or (inside and line.rstrip() == "```"):
            inside = not inside
            continue
        if not inside:
            yield number, re.sub(r"`[^`]*`", "", line)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    inside = False
    for line in path.read_text().splitlines():
        if _FENCE.match(line) or (inside and line.rstrip() == "```"):
            inside = not inside
            continue
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if inside or heading is None:
            continue
        slug = _slug(heading.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


# -- links ---------------------------------------------------------------------------------


def _links() -> Iterator[pytest.ParameterSet]:
    for page in PAGES:
        for number, line in _prose(page):
            for target in _LINK.findall(line):
                if re.match(r"[a-z]+:", target):  # https:, mailto:
                    continue
                yield pytest.param(page, target, id=f"{_rel(page)}:{number}:{target}")


@pytest.mark.parametrize(("page", "target"), list(_links()))
def test_every_relative_link_resolves(page: Path, target: str) -> None:
    file, _, anchor = target.partition("#")
    path = (page.parent / file).resolve() if file else page
    assert path.exists(), f"{_rel(page)} links to {target}: {file} does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in _anchors(path), f"{_rel(page)} links to {target}: no such heading"


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command of this project shown in a shell block."""

    module: str  # vehicle_middleware.X, or "make"
    words: tuple[str, ...]  # the words after the module, quoted strings emptied
    text: str


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The block's lines, those continued with a backslash joined, numbered."""
    pending: list[str] = []
    start = block.line
    for offset, line in enumerate(block.lines):
        if not pending:
            start = block.line + offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        yield start, " ".join([*pending, line])
        pending = []
    if pending:
        yield start, " ".join(pending)


def _segment(text: str) -> str:
    """The command's own words: up to a closing ``)``, a pipe, ``;``, ``&`` or a
    comment outside quotes and outside ``[...]`` (optional parts, as in usage)."""
    depth = 0
    quote: str | None = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0 and (ch in ")|;&" or (ch == "#" and (i == 0 or text[i - 1].isspace()))):
            return text[:i]
    return text


def _commands_in(line: str) -> Iterator[Command]:
    line = re.sub(r"^\$\s+", "", line.strip())  # a console prompt
    for pattern in (_PYTHON_M, _SCRIPT):
        for match in pattern.finditer(line):
            module = SCRIPTS.get(match.group(1), match.group(1))
            rest = _QUOTED.sub("''", _segment(match.group(2)))
            yield Command(module, tuple(rest.split()), match.group(0).strip())
    make = _MAKE.match(line)
    if make:
        rest = _segment(make.group(1))
        yield Command("make", tuple(rest.split()), line)


def _commands() -> list[tuple[str, Command]]:
    found = []
    for page in PAGES:
        for block in _blocks(page):
            if block.info not in SHELL_BLOCKS:
                continue
            for number, line in _logical_lines(block):
                found.extend((f"{_rel(page)}:{number}", c) for c in _commands_in(line))
    return found


COMMANDS = _commands()


@functools.cache
def _help(module: str, path: tuple[str, ...]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *path, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"python -m {module} {' '.join(path)} --help: {done.stderr}"
    return done.stdout


def _subcommands(help_text: str) -> set[str]:
    """The subcommands a ``--help`` offers (argparse prints them as ``{a,b} ...``)."""
    usage = help_text.split("\n\n", 1)[0]
    return {c for group in re.findall(r"\{([\w,-]+)\}\s+\.\.\.", usage) for c in group.split(",")}


def _path(command: Command, limit: int = 99) -> tuple[str, ...]:
    """The subcommands the command names (at most ``limit`` of them)."""
    path: tuple[str, ...] = ()
    for word in command.words:
        if len(path) == limit or word not in _subcommands(_help(command.module, path)):
            break
        path = (*path, word)
    return path


def _fetch_helps(commands: Iterable[Command]) -> None:
    """Every ``--help`` the commands need, level by level, in parallel."""
    commands = [c for c in commands if c.module != "make"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        fetched: set[tuple[str, tuple[str, ...]]] = set()
        for depth in range(4):
            wanted = {(c.module, _path(c, depth)) for c in commands} - fetched
            if not wanted:
                return
            list(pool.map(lambda key: _help(*key), wanted))
            fetched |= wanted


@pytest.fixture(scope="module")
def helps() -> None:
    _fetch_helps(c for _, c in COMMANDS)


@functools.cache
def _make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w.-]+):", text, re.M))


@pytest.mark.usefixtures("helps")
@pytest.mark.parametrize("command", [c for _, c in COMMANDS], ids=[w for w, _ in COMMANDS])
def test_every_command_shown_parses(command: Command) -> None:
    if command.module == "make":
        targets = [w for w in command.words if "=" not in w and not w.startswith("-")]
        assert targets, command.text
        unknown = set(targets) - _make_targets()
        assert not unknown, f"{command.text}: no Makefile target {sorted(unknown)}"
        return
    path = _path(command)
    named = " ".join(["python -m", command.module, *path])
    offered = _subcommands(_help(command.module, path))
    assert not offered, f"{command.text}: {named} needs one of {sorted(offered)}"
    helps = [_help(command.module, path[:i]) for i in range(len(path) + 1)]
    for flag in _FLAG.findall(" ".join(command.words)):
        listed = re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])")
        assert flag == "--help" or any(listed.search(h) for h in helps), (
            f"{command.text}: {flag} is not an option of {named}"
        )


def test_the_docs_show_the_projects_commands() -> None:
    """The parser finds what it is meant to (a guard against a regex that finds nothing)."""
    modules = {c.module for _, c in COMMANDS}
    assert {
        "vehicle_middleware.server",
        "vehicle_middleware.tools",
        "vehicle_middleware.telemetry_export",
        "vehicle_middleware.providers",
        "vehicle_middleware.apps",
        "make",
    } <= modules
    shown = {(c.module, c.words[:2]) for _, c in COMMANDS}
    assert ("vehicle_middleware.server", ("tls", "dev-certs")) in shown
    assert ("vehicle_middleware.tools", ("top", "--target")) in shown


# -- code blocks: shell, text, or a labelled excerpt of a tested example ----------------

TEXT_BLOCKS = frozenset({"", "text"})
EXAMPLES = ROOT / "examples"
_LABEL = re.compile(r"# (examples/\S+) \(excerpt\)")
_PYTHON_LINE = re.compile(
    r"\s*(import \w|from [\w.]+ import |(async )?def \w+\(|class \w+[(:]|await \w"
    r"|async (with|for) )"
)
"""A line that starts a Python statement no shell command or program output starts with."""


def _code_blocks() -> Iterator[pytest.ParameterSet]:
    for page in PAGES:
        for block in _blocks(page):
            yield pytest.param(page, block, id=f"{_rel(page)}:{block.line}")


@functools.cache
def _tests_text() -> str:
    """Every test module's source but this one's, which names examples only to check them."""
    here = Path(__file__).resolve()
    return "\n".join(
        p.read_text() for p in sorted((ROOT / "tests").rglob("*.py")) if p.resolve() != here
    )


@pytest.mark.parametrize(("page", "block"), list(_code_blocks()))
def test_every_code_block_is_shell_text_or_an_excerpt_of_a_tested_example(
    page: Path, block: Block
) -> None:
    where = f"{_rel(page)}:{block.line}"
    if block.info in SHELL_BLOCKS or block.info in TEXT_BLOCKS:
        code = [line for line in block.lines if _PYTHON_LINE.match(line)]
        kind = "shell" if block.info in SHELL_BLOCKS else "text"
        assert not code, (
            f"{where}: a {kind} block holds Python ({code[0].strip()!r}): make the program a "
            "file under examples/ that a test runs, and show it as a ```python block whose "
            "first line is '# examples/PATH (excerpt)'"
        )
        return
    label = _LABEL.fullmatch(block.lines[0]) if block.lines else None
    assert label, (
        f"{where}: a ```{block.info} block is neither shell (```sh) nor text (```): its first "
        "line must say which file under examples/ it is an excerpt of: "
        "'# examples/PATH (excerpt)'"
    )
    source = label.group(1)
    assert (ROOT / source).is_file(), f"{where}: {source} does not exist"
    _assert_lines_in_order(where, block, source)
    assert source in _tests_text(), f"{where}: no test runs {source}"


def _assert_lines_in_order(where: str, block: Block, source: str) -> None:
    """The block's lines after its label (but blank ones and ``...``) are lines of
    ``source``, in their order."""
    program = (ROOT / source).read_text().splitlines()
    at = 0
    for line in block.lines[1:]:
        if not line.strip() or line.strip() == "...":
            continue
        assert line in program[at:], f"{where}: {line!r} is not in {source}"
        at = program.index(line, at) + 1


def _examples() -> list[str]:
    return sorted(
        _rel(p) for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


@pytest.mark.parametrize("example", _examples())
def test_every_example_is_run_by_a_test(example: str) -> None:
    assert example in _tests_text(), f"{example}: no test under tests/ names it (and runs it)"


def test_the_code_block_rule_finds_what_it_is_meant_to() -> None:
    """A guard against a rule that lets everything through."""
    shown = {(_rel(page), block.info) for page in PAGES for block in _blocks(page)}
    assert ("docs/app-developers.md", "python") in shown
    assert ("docs/operators.md", "toml") in shown
    assert _PYTHON_LINE.match("async with AppClient(address, 'a') as app:")
    assert _PYTHON_LINE.match("    await provider.publish({KEY: encode(1.0)})")
    assert _PYTHON_LINE.match("from vehicle_middleware.sdk import Sub")
    assert not _PYTHON_LINE.match("make demo   # the whole system")
    assert not _PYTHON_LINE.match("Test Client> setValue Vehicle.Speed 42.5")
    assert set(_examples()) >= {
        "examples/quickstart/app.py",
        "examples/actuation/media.py",
        "examples/core/ess_core.py",
    }


# -- the README's excerpts -----------------------------------------------------------------


def _excerpts() -> Iterator[pytest.ParameterSet]:
    readme = ROOT / "README.md"
    for block in _blocks(readme):
        source = _LABEL.fullmatch(block.lines[0])
        if block.info == "python" and source:
            yield pytest.param(block, source.group(1), id=f"README.md:{block.line}")


EXCERPTS = list(_excerpts())


def test_the_readme_shows_both_quickstart_programs() -> None:
    assert {p.values[1] for p in EXCERPTS} == {
        "examples/quickstart/provider.py",
        "examples/quickstart/app.py",
    }


@pytest.mark.parametrize(("block", "source"), EXCERPTS)
def test_each_readme_excerpt_is_lines_of_its_program_in_order(block: Block, source: str) -> None:
    _assert_lines_in_order(f"README.md:{block.line}", block, source)
