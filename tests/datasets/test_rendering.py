"""Model output rendered as Markdown, sanitised by an allow-list: what a page may get."""

import html
import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from apps.datasets import rendering
from apps.datasets.rendering import (
    RAW,
    WHITESPACE,
    highlight_css,
    render_markdown,
    sanitize,
    show_text,
)
from tests.base import ROOT
from tests.factories import make_dataset
from tests.model_output import CHAT, CJK, CODE, HOSTILE, LATEX, MARKDOWN, RTL, TABLE, long_answer


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))


def elements(markup: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(markup)
    return parser.found


def assert_inert(markup: str) -> None:
    """Only allowed tags; no handler, style or id; links only to http(s)/mailto; no image."""
    for tag, attrs in elements(markup):
        assert tag in rendering.TAGS, (tag, markup)
        assert tag not in {"img", "script", "style", "svg", "iframe", "object", "embed"}
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, markup)
            assert name not in {"style", "id", "src", "srcset", "xlink:href", "formaction"}
            if name == "href":
                assert value.lower().startswith(("https://", "http://", "mailto:")), markup
                assert tag == "a", (tag, markup)


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_markdown_renders_inert(payload):
    rendered = render_markdown(f"before {payload} after")
    # Whatever URL the source holds stays text (checked by attribute, not by string).
    assert_inert(rendered)
    # What was markup in the source is shown as text, not dropped without a trace.
    assert "before" in rendered and "after" in rendered


def test_an_image_is_a_link_the_reader_may_click():
    rendered = render_markdown("![a cat](https://example.com/cat.png)")
    assert "<img" not in rendered
    assert '<a class="md-image" href="https://example.com/cat.png"' in rendered
    assert "[image: a cat]" in rendered and 'rel="noopener noreferrer nofollow"' in rendered


@pytest.mark.parametrize(
    "markup",
    [
        '<img src=x onerror="alert(1)">',
        '<p onclick="alert(1)" onerror="alert(2)">p</p>',
        '<span onerror="alert(1)" onfocus="alert(2)" tabindex="1">s</span>',
        '<a href="javascript:alert(1)">a</a>',
        '<a href="data:text/html,<script>alert(1)</script>">a</a>',
        '<a href="/admin/">relative</a>',
        '<p style="background:url(https://tracker.invalid/)" id="main-nav">p</p>',
        '<math><mi href="javascript:alert(1)" style="x">x</mi></math>',
        "<script>alert(1)</script><style>p{}</style><svg onload=alert(1)></svg>",
        '<span class="k evil">code</span><div class="highlight x">d</div>',
    ],
)
def test_the_sanitiser_drops_what_its_allow_list_does_not_name(markup):
    """The second wall, fed markup directly (Markdown never makes these): a config that
    allowed an event handler, a style, an id, an image or a script URL fails here."""
    cleaned = sanitize(markup)
    assert_inert(cleaned)
    for tag, attrs in elements(cleaned):
        classes = set(attrs.get("class", "").split())
        assert classes <= rendering.CLASSES.get(tag, set()), (tag, classes)
    assert "javascript:" not in cleaned and "url(" not in cleaned.replace("url(https", "")


def test_the_allow_list_names_no_handler_style_or_source():
    names = {name for attrs in rendering.ATTRIBUTES.values() for name in attrs}
    assert not {n for n in names if n.startswith("on")}
    assert not names & {"style", "id", "src", "srcset", "xlink:href", "formaction"}
    assert {tag for tag, attrs in rendering.ATTRIBUTES.items() if "href" in attrs} == {"a"}
    assert not rendering.TAGS & {"img", "script", "style", "svg", "iframe", "form", "input"}
    assert sorted(rendering.URL_SCHEMES) == ["http", "https", "mailto"]


def test_markdown_tables_strikethrough_and_lists():
    rendered = render_markdown(f"{MARKDOWN}\n\n{TABLE}")
    assert "<h1" in rendered and "<strong>bold</strong>" in rendered
    assert (
        "<s>a retracted claim</s>" in rendered and "<ol" in rendered and "<blockquote" in rendered
    )
    assert '<th dir="auto" class="align-left">Model</th>' in rendered
    assert '<td dir="auto" class="align-right">91.2</td>' in rendered
    assert '<a href="https://docs.python.org/3/"' in rendered
    assert_inert(rendered)


def test_code_in_five_languages_is_highlighted_with_classes():
    rendered = render_markdown(CODE)
    blocks = rendered.split('<div class="code-block"')[1:]
    assert len(blocks) == 5
    for block, language, keyword in zip(
        blocks,
        ["python", "javascript", "rust", "sql", "bash"],
        ["def", "const", "fn", "SELECT", "for"],
        strict=True,
    ):
        assert f'<div class="code-lang">{language}</div>' in block
        assert re.search(f'<span class="k[a-z]?">{keyword}</span>', block), (language, block)
    assert "style=" not in rendered
    assert_inert(rendered)


def test_highlight_css_is_pygments_own_for_the_chosen_style():
    committed = (ROOT / "static" / "css" / "highlight.css").read_text()
    assert committed == highlight_css(), (
        "regenerate: python -c 'from apps.datasets.rendering import highlight_css; "
        'print(highlight_css(), end="")\' > static/css/highlight.css'
    )
    assert ".highlight .k " in committed


def test_latex_becomes_mathml_and_what_fails_shows_its_source():
    rendered = render_markdown(LATEX)
    assert rendered.count("<math") == 4
    assert rendered.count('display="block"') == 2
    assert "$5 and $10" in rendered  # money, not math
    assert '<code class="math-source">$\\notacommand{x}$</code>' in rendered
    assert_inert(rendered)


def test_right_to_left_and_cjk_blocks_find_their_own_direction():
    rendered = render_markdown(f"{RTL}\n\n{CJK}")
    paragraphs = [attrs for tag, attrs in elements(rendered) if tag == "p"]
    assert len(paragraphs) == 4 and all(p.get("dir") == "auto" for p in paragraphs)
    assert "مرحبا بالعالم" in rendered and "答案是B。" in rendered
    shown = show_text(RTL)
    assert '<div class="md" dir="auto">' in shown


def test_a_chat_transcript_reads_as_messages():
    shown = show_text(CHAT)
    assert shown.count('<div class="chat-message') == 3
    assert '<div class="chat-role">assistant</div>' in shown
    assert "<strong>2 + 2</strong>" in shown and "<code>4</code>" in shown


def test_raw_shows_the_exact_characters():
    text = "a  b\t<c>\n\u200bd &amp; "
    shown = show_text(text, RAW)
    body = shown.split('<pre class="raw" dir="auto">')[1].split("</pre>")[0]
    assert html.unescape(body) == text
    marked = show_text(text, WHITESPACE)
    assert marked.count('class="ws ws-space"') == 4
    assert 'class="ws ws-tab"' in marked and 'data-mark="U+200B"' in marked
    # The marks are drawn by CSS around the characters: the characters themselves stay.
    inner = marked.split('<pre class="raw" dir="auto">')[1].split("</pre>")[0]
    stripped = "".join(part.split(">", 1)[-1] for part in inner.split("<"))
    assert html.unescape(stripped) == text


def test_a_long_answer_folds_with_its_length_shown():
    answer = long_answer()
    assert len(answer) == 20_000
    shown = show_text(answer)
    assert "is-long" in shown and "Show all 20,000 characters" in shown
    assert "THE END OF THE ANSWER" in shown  # all of it is on the page, folded by CSS
    assert "is-long" not in show_text("short")


# ---- the reader's choice, kept per user ----------------------------------------------------
def test_the_text_view_is_stored_per_user_and_used_by_the_pages(viewer_client, viewer_user, task):
    dataset = make_dataset(task, [{"key": "a", "fields": {"q": "**bold** <b>x</b>"}}])
    url = reverse("datasets:item-detail", args=[dataset.pk, 0])
    assert "<strong>bold</strong>" in viewer_client.get(url).content.decode()
    answer = viewer_client.post(reverse("accounts:text-view"), {"text_view": "raw", "next": url})
    assert (answer.status_code, answer["Location"]) == (302, url)
    viewer_user.refresh_from_db()
    assert viewer_user.text_view == "raw"
    page = viewer_client.get(url).content.decode()
    assert '<pre class="raw" dir="auto">**bold** &lt;b&gt;x&lt;/b&gt;</pre>' in page
    assert 'value="raw" class="chip is-on" aria-pressed="true"' in page


def test_the_text_view_refuses_unknown_values_and_foreign_redirects(viewer_client, viewer_user):
    url = reverse("accounts:text-view")
    answer = viewer_client.post(url, {"text_view": "<script>", "next": "https://evil.example/"})
    assert (answer.status_code, answer["Location"]) == (302, "/")
    viewer_user.refresh_from_db()
    assert viewer_user.text_view == "rendered"
    assert viewer_client.get(url).status_code == 405
