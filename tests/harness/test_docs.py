"""The documentation names only what exists: every management command and its options, every
environment variable and setting, every URL, file and cross-reference the README and docs/
mention. Renaming any of them without the docs fails here, with the page that names it."""

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import get_commands, load_command_class
from django.urls import Resolver404, resolve
from markdown_it import MarkdownIt
from markdown_it.token import Token

from apps.judges import plugins
from evalsite.help import slugify_heading
from tests.base import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
# Paths on other servers that the docs name: OpenAI's Batch API, which batch mode talks to.
ELSEWHERE = {"/v1/files", "/v1/batches"}
# Programs, not management commands, that the docs show with options.
PROGRAMS = {
    "bin/run",
    "bin/test",
    "bench/run",
    "curl",
    "export",
    "python3",
    "python3.12",
    ".venv/bin/python",
    ".venv-test/bin/python",
    ".venv/bin/pip",
    "pip",
    "ruff",
    "mypy",
    "git",
    "apt-get",
    "pg_dump",
    "pg_restore",
    "lm_eval",
}
# Values that look like variables (`CLIENT_IP_HEADER=HTTP_X_FORWARDED_FOR`, `TRUE` in a cell).
VALUES = {"HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "UTC", "INFO", "TRUE", "FALSE"}
# Variables read by others: gunicorn reads WEB_CONCURRENCY, the shell PATH, Python
# PYTHONDONTWRITEBYTECODE; the API examples set EVALSITE and TOKEN for their curl lines.
OTHERS = {"WEB_CONCURRENCY", "PATH", "EVALSITE", "TOKEN", "PYTHONDONTWRITEBYTECODE"}
# Not variables: the dicts a plug-in module listed in EVALSITE_PLUGINS defines (docs/judges.md).
PLUGIN_DICTS = set(plugins.MODULE_DICTS.values())
# Files of the machine, not pages of the site.
SYSTEM_PATHS = ("/usr/", "/etc/", "/tmp/", "/var/", "/dev/", "/proc/", "/srv/")
TREE = (
    "apps/",
    "bin/",
    "bench/",
    "tests/",
    "evalsite/",
    "templates/",
    "static/",
    "docs/",
    ".ci/",
)
TREE_FILES = (".env.example", "requirements.txt", "requirements-test.txt", "pyproject.toml")
ENV_READ = re.compile(
    r"""(?:env(?:_\w+)?\(\s*|os\.environ(?:\.get)?[\[(]\s*|getenv\(\s*)"([A-Z][A-Z0-9_]+)"|"""
    r"""\$\{?([A-Z][A-Z0-9_]+)"""
)


@dataclass(frozen=True)
class Mention:
    page: str
    text: str  # a code span, or one line of a code block

    def __str__(self) -> str:
        return f"{self.page}: `{self.text}`"


def _tokens(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _tokens(token.children)


MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@cache
def parsed(path: Path) -> tuple[list[Mention], list[str], set[str]]:
    """(code spans and code lines, link targets, heading slugs) of one page."""
    page = str(path.relative_to(ROOT))
    code: list[Mention] = []
    links: list[str] = []
    headings: set[str] = set()
    tokens = list(_tokens(MD.parse(path.read_text(encoding="utf-8"))))
    for index, token in enumerate(tokens):
        if token.type == "code_inline":
            code.append(Mention(page, " ".join(token.content.split())))
        elif token.type in ("fence", "code_block"):
            for line in token.content.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    code.append(Mention(page, line.strip()))
        elif token.type == "link_open":
            links.append(str(token.attrGet("href")))
        elif token.type == "heading_open":
            headings.add(slugify_heading(tokens[index + 1].content))
    return code, links, headings


def mentions() -> list[Mention]:
    return [mention for path in PAGES for mention in parsed(path)[0]]


# ---- commands and their options -------------------------------------------------------------
@cache
def parser_of(name: str) -> argparse.ArgumentParser:
    return load_command_class(get_commands()[name], name).create_parser("manage.py", name)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def words(text: str) -> list[str]:
    """A command line's words up to its end: a comment, a pipe or the next command."""
    out = []
    for word in text.split():
        if word.startswith("#") or word in ("&&", "||", ";", ">", "<", "|"):
            break
        out.append(word)
    return out


def command_lines(text: str) -> Iterator[tuple[str, list[str]]]:
    """(command, its words) for each management command the text runs."""
    found = False
    for match in re.finditer(r"manage\.py\s+([\w-]+)(.*)", text):
        found = True
        yield match[1], words(match[2])
    if found:
        return
    first, *rest = words(text) or [""]
    if first in get_commands() and first not in ("help", "version"):
        yield first, rest
    elif (
        re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", first)
        and first not in PROGRAMS
        and rest
        and any(w.startswith("--") or w.isupper() for w in rest)
    ):
        yield first, rest  # shaped like a command: it must be one


def options(rest: list[str]) -> list[str]:
    found = []
    for word in rest:
        for part in word.strip("[]().,`").split("/"):
            part = part.strip("[]().,|")
            if part.startswith("--") and len(part) > 2:
                found.append(part.split("=")[0])
    return found


def check_command(name: str, rest: list[str]) -> str | None:
    if name not in get_commands():
        return f"no management command {name!r}"
    parser = parser_of(name)
    parsers = [parser]
    subs = subparsers(parser)
    if subs:
        if not rest:
            return None
        chosen = rest[0].split("|")
        if all(choice in subs for choice in chosen):
            parsers = [subs[choice] for choice in chosen]
        elif not rest[0].startswith("-") and rest[0] not in ("…", "..."):
            return f"{name} has no subcommand {rest[0]!r} (it has {', '.join(subs)})"
    if subs and rest and rest[0] in ("…", "..."):  # any subcommand: the option is one's
        for option in options(rest):
            if not any(option in sub._option_string_actions for sub in subs.values()):
                return f"no subcommand of {name} has {option}"
        return None
    for option in options(rest):
        for each in parsers:
            if option not in each._option_string_actions:
                return f"{each.prog.removeprefix('manage.py ')} has no option {option}"
    return None


def test_every_management_command_the_docs_run_exists_with_its_options():
    problems = []
    for mention in mentions():
        for name, rest in command_lines(mention.text):
            if problem := check_command(name, rest):
                problems.append(f"{mention}: {problem}")
    assert not problems, "\n".join(problems)


def test_an_option_named_alone_belongs_to_some_command_or_benchmark():
    ours = [
        name
        for name, app in get_commands().items()
        if app.startswith("apps.") or name in ("rqworker", "check")
    ]
    known = {opt for name in ours for opt in parser_of(name)._option_string_actions} | {
        opt
        for name in ours
        for sub in subparsers(parser_of(name)).values()
        for opt in sub._option_string_actions
    }
    for script in ROOT.glob("bench/*.py"):  # the benchmarks' own options
        known |= set(re.findall(r"""["'](--[\w-]+)["']""", script.read_text()))
    problems = [
        f"{mention}: no command has {option}"
        for mention in mentions()
        if re.fullmatch(r"--[\w-]+(?:/--[\w-]+)*(?: \S+)?", mention.text)
        for option in options([mention.text.split()[0]])
        if option not in known
    ]
    assert not problems, "\n".join(problems)


def test_programs_shown_with_options_are_commands_or_known_programs():
    """A line with --options that runs neither a known program nor a management command names
    a command that does not exist (or one the docs should write as `manage.py NAME`)."""
    problems = []
    for mention in mentions():
        first = (words(mention.text) or [""])[0]
        if (
            "--" in mention.text
            and re.fullmatch(r"[a-z][\w.-]*", first)
            and first not in PROGRAMS
            and first not in get_commands()
            and "manage.py" not in mention.text
            and not mention.text.startswith("--")
        ):
            problems.append(f"{mention}: {first!r} is not a management command")
    assert not problems, "\n".join(problems)


# ---- environment variables and settings -------------------------------------------------------
@cache
def variables_read() -> set[str]:
    """Every environment variable the code reads: settings, apps, the scripts in bin/ and bench/."""
    files = [
        *ROOT.glob("evalsite/**/*.py"),
        *ROOT.glob("apps/**/*.py"),
        *(ROOT / "bin").iterdir(),
        ROOT / "bench/run",
    ]
    found: set[str] = set()
    for path in files:
        if path.is_file():
            for match in ENV_READ.finditer(path.read_text(encoding="utf-8")):
                found.add(match[1] or match[2])
    return found


def named_variables() -> Iterator[tuple[Mention, str]]:
    for mention in mentions():
        text = mention.text.removeprefix("export ")
        if match := re.fullmatch(r"([A-Z][A-Z0-9_]{2,})(?:=\S*)?", text):
            yield mention, match[1]
        else:  # NAME=value before a command: `EVALSITE_TEST_DBS=sqlite bin/test`
            for match in re.finditer(r"(?:^|\s)([A-Z][A-Z0-9_]{2,})=", text):
                yield mention, match[1]


def test_every_variable_the_docs_name_is_read_or_is_a_setting():
    known = variables_read()
    problems = [
        f"{mention}: {name} is neither read from the environment nor a Django setting"
        for mention, name in named_variables()
        if name not in known | VALUES | OTHERS | PLUGIN_DICTS and not hasattr(settings, name)
    ]
    assert not problems, "\n".join(problems)


def test_env_example_lists_every_variable_the_settings_read_and_nothing_else():
    example = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^# ?([A-Z][A-Z0-9_]+)=", example, re.MULTILINE))
    source = (ROOT / "evalsite/settings.py").read_text()
    read = {m[1] for m in ENV_READ.finditer(source) if m[1]} - {"EVALSITE_TESTING"}  # tests' own
    assert read - listed == set(), "read by settings.py, missing from .env.example"
    assert listed - variables_read() - OTHERS == set(), ".env.example lists what nothing reads"
    table = parsed(ROOT / "docs/configuration.md")[0]
    documented = {mention.text for mention in table}
    assert listed - documented == set(), "in .env.example, not in docs/configuration.md"


# ---- URLs, files and links -------------------------------------------------------------------------
def named_urls() -> Iterator[tuple[Mention, str]]:
    for mention in mentions():
        for match in re.finditer(r"(?:^|\s|\(|\$EVALSITE)(/[\w<>:./?=&|-]*)", mention.text):
            path = match[1]
            if not path.startswith(SYSTEM_PATHS):
                yield mention, path


def test_every_url_the_docs_name_resolves():
    problems = []
    for mention, url in named_urls():
        if url in ELSEWHERE:
            continue
        path = re.sub(r"<[^>]+>", "1", url.split("?")[0].split("#")[0])
        try:
            resolve(path)
        except Resolver404:
            problems.append(f"{mention}: {url} is no page of evalsite")
    assert not problems, "\n".join(problems)


def test_every_file_the_docs_name_is_in_the_tree():
    problems = []
    for mention in mentions():
        for word in words(mention.text) or [mention.text]:
            word = word.strip("`'\",;()[]")
            if not (word.startswith(TREE) or word in TREE_FILES):
                continue
            pattern = re.sub(r"<[^>]+>", "*", word.split(":")[0]).rstrip("/")
            if not list(ROOT.glob(pattern)):
                problems.append(f"{mention}: {word} is not in the tree")
    assert not problems, "\n".join(problems)


def test_links_between_pages_reach_a_page_and_its_heading():
    problems = []
    for path in PAGES:
        for href in parsed(path)[1]:
            if href.startswith(("http://", "https://", "mailto:")):
                continue
            target, _, anchor = href.partition("#")
            file = (path.parent / target).resolve() if target else path
            if not file.exists():
                problems.append(f"{path.name}: link to {href}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in parsed(file)[2]:
                problems.append(f"{path.name}: link to {href}: no such heading")
    assert not problems, "\n".join(problems)


# ---- the README is the way in ----------------------------------------------------------------------
def test_the_readme_is_short_and_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    first_block = readme.split("```sh\n", 1)[1].split("```")[0]
    assert first_block.splitlines()[0].startswith("bin/run")
    assert first_block.splitlines()[1].startswith("bin/test")
    assert readme.index("```sh") < readme.index("\n## ", readme.index("## Two commands") + 1)


def test_every_docs_page_is_listed_in_the_index_and_the_readme():
    index = parsed(ROOT / "docs/index.md")[1]
    readme = parsed(ROOT / "README.md")[1]
    for page in DOCS:
        if page.name != "index.md":
            assert page.name in index, page.name
            assert f"docs/{page.name}" in readme, page.name


@pytest.mark.parametrize(
    "text, problem",
    [
        ("manage.py start_run generation --epoch 3", "no option --epoch"),
        ("start_run retry_failed 4", "no subcommand 'retry_failed'"),
        ("manage.py import_datasets FILE", "no management command"),
        ("leaderboard TASK --pairwise --format csv", None),
        ("start_run generation|judge|pairwise … --batch", None),
    ],
)
def test_the_command_check_catches_a_wrong_name_or_option(text, problem):
    """The checks above would pass on nothing; here they fail on what they should."""
    found = [check_command(name, rest) for name, rest in command_lines(text)]
    assert found, text
    if problem is None:
        assert found == [None]
    else:
        assert found[0] is not None and problem in found[0]
