"""Model output as the pages show it: Markdown rendered on the server, then sanitised.

Every page that shows a response, a reference, an input or a judge's reason goes through
`show_text` (the `{% model_text %}` tag), so one pipeline decides what model output may become:

1. markdown-it-py, CommonMark with GFM tables and strikethrough, raw HTML off: a `<script>` in
   an answer is text, never markup. Math ($…$, $$…$$, \\(…\\), \\[…\\]) becomes MathML on the
   server (latex2mathml), so no script typesets it; what does not convert shows as its source.
   Fenced code is highlighted by Pygments with CSS classes (static/css/highlight.css), because
   the pages' Content-Security-Policy is the place to forbid inline code, not this module.
   Images become links: a page that fetched them would tell a third party who reads what.
2. nh3 (ammonia) with an allow-list of tags, attributes, classes and URL schemes, as a second
   wall in case a renderer rule or a plugin ever lets markup through: no event handler, no
   style, no id, no javascript:/data: URL, no relative URL, no <img>.

Raw mode shows the exact characters (optionally with whitespace and invisible characters
marked). Every block carries dir="auto", so right-to-left text reads right-to-left without
reordering its neighbours.
"""

import html
import re
import secrets
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import latex2mathml.converter
import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.texmath import texmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from apps.datasets.values import as_text

# ---- the user's choice -----------------------------------------------------------------
RENDERED, RAW, WHITESPACE = "rendered", "raw", "whitespace"
MODES = (RENDERED, RAW, WHITESPACE)

# A field longer than this folds to its first screenful, with its length on the button
# that opens it in place (CSS only: a checkbox and its label, no script).
FOLD_CHARS = 2500
FOLD_LINES = 40
# Pygments' regex lexers are linear in practice, but a megabyte of code is not worth colour.
HIGHLIGHT_LIMIT = 100_000

# ---- Pygments: classes only; the colours are in a static stylesheet ----------------------
CODE_STYLE = "vs"  # dark colours on a light background: every token class passes AA contrast
FORMATTER = HtmlFormatter(cssclass="highlight", wrapcode=True, style=CODE_STYLE)


def highlight_css() -> str:
    """static/css/highlight.css, as Pygments writes it for CODE_STYLE."""
    # Token colours only: Pygments' line-number rules would restyle every <pre> of the site.
    lines = FORMATTER.get_background_style_defs(".highlight")
    lines += FORMATTER.get_token_style_defs(".highlight")
    return "\n".join(lines) + "\n"


# ---- the sanitiser's allow-list -----------------------------------------------------------
MATHML_TAGS = {
    "math", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msup", "msub", "msubsup",
    "mfrac", "msqrt", "mroot", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "menclose", "mpadded", "mphantom", "mmultiscripts", "mprescripts", "none",
}  # fmt: skip
TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del", "code",
    "pre", "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a",
    "div", "span", *MATHML_TAGS,
}  # fmt: skip
ATTRIBUTES: dict[str, set[str]] = {
    "*": {"dir"},
    "a": {"href", "title"},
    "ol": {"start"},
    "math": {"xmlns", "display"},
    "mi": {"mathvariant"},
    "mo": {"stretchy", "fence", "separator", "lspace", "rspace", "largeop", "movablelimits",
           "accent", "form", "minsize", "maxsize", "symmetric"},
    "mspace": {"width", "height", "depth"},
    "mstyle": {"displaystyle", "scriptlevel", "mathvariant"},
    "mfrac": {"linethickness"},
    "mover": {"accent"},
    "munder": {"accentunder"},
    "munderover": {"accent", "accentunder"},
    "menclose": {"notation"},
    "mtable": {"columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines",
               "rowlines", "frame", "displaystyle"},
    "mtd": {"columnalign", "rowalign", "columnspan", "rowspan"},
    "mtr": {"columnalign", "rowalign"},
}  # fmt: skip
ALIGN_CLASSES = {"align-left", "align-center", "align-right"}
CLASSES: dict[str, set[str]] = {
    "div": {"highlight", "code-block", "code-lang", "math-display"},
    "span": {name for name in STANDARD_TYPES.values() if name} | {"math-error"},
    "code": {"math-source"},
    "a": {"md-image"},
    "th": ALIGN_CLASSES,
    "td": ALIGN_CLASSES,
}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener noreferrer nofollow"

CLEANER = nh3.Cleaner(
    tags=TAGS,
    attributes=ATTRIBUTES,
    allowed_classes=CLASSES,
    url_schemes=URL_SCHEMES,
    url_relative="deny",
    link_rel=LINK_REL,
    strip_comments=True,
)


def sanitize(markup: str) -> str:
    """Whatever markup comes in, only the allow-list goes out."""
    return str(CLEANER.clean(markup))


# ---- Markdown -------------------------------------------------------------------------------
SAFE_URL = re.compile(r"(?:https?://|mailto:)[^\s]*\Z", re.IGNORECASE)


def _validate_link(url: str) -> bool:
    """Absolute http(s) and mailto only: no javascript:, no data:, nothing relative to us."""
    return bool(SAFE_URL.match(url.strip()))


def _math(latex: str, display: bool) -> str:
    """LaTeX as MathML; an unknown command or a parse error shows the source instead."""
    try:
        mathml = latex2mathml.converter.convert(latex, display="block" if display else "inline")
    except Exception:  # any failure of the converter means: show the source
        mathml = ""
    # latex2mathml keeps an unknown command as an identifier named after it (<mi>\foo</mi>).
    if not mathml or "\\" in mathml:
        source = escapeHtml(f"$${latex}$$" if display else f"${latex}$")
        return f'<span class="math-error"><code class="math-source">{source}</code></span>'
    return f'<div class="math-display">{mathml}</div>' if display else mathml


def _render_math_inline(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return _math(tokens[idx].content, display=tokens[idx].type == "math_inline_double")


def _render_math_block(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return _math(tokens[idx].content, display=True)


def _lexer(info: str) -> Lexer | None:
    name = info.strip().split(maxsplit=1)[0] if info.strip() else ""
    if not name:
        return None
    try:
        return get_lexer_by_name(name)
    except ClassNotFound:
        return None


def _render_fence(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    lexer = _lexer(token.info)
    language = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
    label = f'<div class="code-lang">{escapeHtml(language)}</div>' if language else ""
    if lexer is None or len(token.content) > HIGHLIGHT_LIMIT:
        code = f'<div class="highlight"><pre><code>{escapeHtml(token.content)}</code></pre></div>'
    else:
        code = str(highlight(token.content, lexer, FORMATTER))
    return f'<div class="code-block" dir="ltr">{label}{code}</div>\n'


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """An image as a link to it: the reader chooses to fetch it; the page never does."""
    token = tokens[idx]
    src = escapeHtml(str(token.attrGet("src") or ""))
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env) or "image")
    return f'<a class="md-image" href="{src}" title="{src}">[image: {alt}]</a>'


BIDI_BLOCKS = {
    "paragraph_open", "heading_open", "list_item_open", "blockquote_open", "th_open", "td_open",
}  # fmt: skip
ALIGN_STYLE = re.compile(r"text-align:\s*(left|center|right)")


def _blocks(state: StateCore) -> None:
    """Every block finds its own direction (Arabic and Hebrew right to left, code left to
    right); a table column's alignment becomes a class, since style attributes do not pass."""
    for token in state.tokens:
        if token.type in BIDI_BLOCKS:
            token.attrSet("dir", "auto")
        style = str(token.attrGet("style") or "")
        if token.type in ("th_open", "td_open") and style:
            match = ALIGN_STYLE.search(style)
            token.attrs.pop("style", None)
            if match:
                token.attrSet("class", f"align-{match.group(1)}")
        for child in token.children or []:
            # Where a link goes, on hover: its text may say otherwise.
            if child.type == "link_open":
                child.attrSet("title", str(child.attrGet("href") or ""))


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _validate_link  # type: ignore[method-assign]
    # \( \) and \[ \] (what most chat models write), then $ and $$ as Pandoc reads them, so
    # that "$5 and $10" stays money: no space inside the dollars, no digit right outside.
    texmath_plugin(md, delimiters="brackets")
    dollarmath_plugin(
        md, allow_labels=False, allow_space=False, allow_digits=False, double_inline=True
    )
    md.core.ruler.push("evalsite_blocks", _blocks)
    for name in ("math_inline", "math_inline_double", "math_single"):
        md.add_render_rule(name, _render_math_inline)
    for name in ("math_block", "math_block_eqno", "math_block_label"):
        md.add_render_rule(name, _render_math_block)
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("image", _render_image)
    return md


MARKDOWN = _markdown()


def render_markdown(text: str) -> str:
    """Markdown source → sanitised HTML."""
    return sanitize(MARKDOWN.render(text))


# ---- raw -------------------------------------------------------------------------------
def _mark(char: str) -> str:
    """One character shown for what it is (whitespace mode); the character itself stays, so
    a copy from the page is still exact."""
    if char == " ":
        return '<span class="ws ws-space"> </span>'
    if char == "\t":
        return '<span class="ws ws-tab">\t</span>'
    if char == "\n":
        return '<span class="ws ws-newline"></span>\n'
    if char == "\r":
        return '<span class="ws ws-mark" data-mark="CR">\r</span>'
    return f'<span class="ws ws-mark" data-mark="U+{ord(char):04X}">{html.escape(char)}</span>'


def _invisible(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) in ("Cf", "Cc", "Zs", "Zl", "Zp")


def render_raw(text: str, whitespace: bool = False) -> str:
    if not whitespace:
        return html.escape(text)
    return "".join(_mark(c) if _invisible(c) else html.escape(c) for c in text)


# ---- one value, as a page shows it -------------------------------------------------------
@dataclass(frozen=True)
class Message:
    role: str
    content: str


def chat_messages(value: Any) -> list[Message] | None:
    """A chat transcript ([{"role": …, "content": …}, …]) as messages, else None."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return None
    return [Message(str(m["role"]), as_text(m["content"])) for m in value]


def _body(value: Any, mode: str) -> tuple[str, str]:
    """(the field's HTML, its full text as counted for folding)."""
    text = as_text(value, indent=2)
    if mode != RENDERED:
        return f'<pre class="raw" dir="auto">{render_raw(text, mode == WHITESPACE)}</pre>', text
    messages = chat_messages(value)
    if messages is not None:
        parts = [
            f'<div class="chat-message chat-{html.escape(re.sub(r"[^a-z]", "", m.role.lower()))}">'
            f'<div class="chat-role">{html.escape(m.role)}</div>'
            f'<div class="md" dir="auto">{render_markdown(m.content)}</div></div>'
            for m in messages
        ]
        return f'<div class="chat">{"".join(parts)}</div>', text
    if not isinstance(value, str) and value is not None:
        # Objects and lists read best as what they are: JSON, highlighted.
        return f'<div class="md" dir="ltr">{render_markdown(_fenced(text, "json"))}</div>', text
    return f'<div class="md" dir="auto">{render_markdown(text)}</div>', text


def _fenced(text: str, language: str) -> str:
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}{language}\n{text}\n{fence}"


def show_text(value: Any, mode: str = RENDERED, css_class: str = "", fold: bool = True) -> str:
    """One field of model output (or of a dataset) as HTML, safe to mark safe: rendered
    Markdown or the raw characters, folded to a screenful when long."""
    mode = mode if mode in MODES else RENDERED
    body, text = _body(value, mode)
    classes = " ".join(filter(None, ["model-text", f"text-{mode}", css_class]))
    chars = len(text)
    if not fold or (chars <= FOLD_CHARS and text.count("\n") < FOLD_LINES):
        return f'<div class="{classes}" data-chars="{chars}">{body}</div>'
    # Random, not counted: an HTMX swap brings in fields rendered by another request.
    toggle = f"fold-{secrets.token_hex(6)}"
    return (
        f'<div class="{classes} is-long" data-chars="{chars}">'
        f'<input type="checkbox" class="fold-toggle" id="{toggle}">'
        f'<div class="fold-body">{body}</div>'
        f'<label class="fold-label" for="{toggle}">'
        f'<span class="fold-more">Show all {chars:,} characters</span>'
        f'<span class="fold-less">Fold ({chars:,} characters)</span></label></div>'
    )
