"""The help pages: docs/*.md, rendered for people who are signed in.

The pages are our own files, not model output, so they are rendered without the sanitiser
(raw HTML in them stays escaped: markdown-it's html option is off). Links between pages
(`runs.md#batch-mode`) become links between help pages; a link to any other file of the tree
becomes plain text, since the site does not serve the tree."""

import re
from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.anchors import anchors_plugin

DOCS = Path(settings.BASE_DIR) / "docs"
INDEX = "index"
PAGE_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
DOC_LINK = re.compile(r"(?:\./)?([a-z][a-z0-9_-]*)\.md(#[\w-]*)?\Z")


def slugify_heading(title: str) -> str:
    """GitHub's heading ids, so that `page.md#heading` works on GitHub and here alike."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    anchors_plugin(md, min_level=2, max_level=3, slug_func=slugify_heading)
    return md


MARKDOWN = _markdown()


def _help_href(href: str) -> str | None:
    """Where a link of a docs page goes on the site; None: nowhere (a file of the tree)."""
    if href.startswith(("http://", "https://", "mailto:", "#")):
        return href
    if href in ("../README.md", "index.md"):
        return reverse("help")
    if match := DOC_LINK.match(href):
        return reverse("help-page", args=[match[1]]) + (match[2] or "")
    return None


def _relink(tokens: list[Token]) -> None:
    for token in tokens:
        if token.children:
            _relink(token.children)
    for index, token in enumerate(tokens):
        if token.type != "link_open":
            continue
        href = _help_href(str(token.attrGet("href") or ""))
        if href is not None:
            token.attrSet("href", href)
            continue
        # The link's text stays, without the link: hide the open and its matching close.
        token.hidden = True
        depth = 0
        for later in tokens[index + 1 :]:
            if later.type == "link_open":
                depth += 1
            elif later.type == "link_close":
                if depth == 0:
                    later.hidden = True
                    break
                depth -= 1


@cache
def rendered(name: str) -> tuple[str, SafeString]:
    """(title, HTML) of docs/<name>.md; cached per process, like templates."""
    path = DOCS / f"{name}.md"
    if not PAGE_NAME.match(name) or not path.is_file():
        raise Http404("No such help page.")
    text = path.read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip() if text else name
    tokens = MARKDOWN.parse(text)
    _relink(tokens)
    # Our own files, with raw HTML escaped (html off) and markdown-it's link check on.
    html = MARKDOWN.renderer.render(tokens, MARKDOWN.options, {})
    # A code block wider than the page scrolls: focusable, so a keyboard can scroll it too
    # (raw HTML is escaped, so every "<pre>" here is the renderer's).
    html = html.replace("<pre>", '<pre tabindex="0">')
    return title, mark_safe(html)  # noqa: S308


INDEX_LINK = re.compile(r"\[([^\]]+)\]\(([a-z][a-z0-9_-]*)\.md\)")


@cache
def pages() -> list[tuple[str, str]]:
    """(name, title) of each page, in the order docs/index.md lists them: the flow's."""
    text = (DOCS / f"{INDEX}.md").read_text(encoding="utf-8")
    listed = dict((name, title) for title, name in INDEX_LINK.findall(text))
    return list(listed.items())


def help_page(request: HttpRequest, page: str = INDEX) -> HttpResponse:
    title, body = rendered(page)
    return render(
        request, "help.html", {"title": title, "body": body, "page": page, "pages": pages()}
    )
