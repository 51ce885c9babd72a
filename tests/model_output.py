"""Answers as real models write them, and hostile ones: the hold-out for rendering tests
(tests/datasets/test_rendering.py, tests/review/test_rendering_browser.py)."""

MARKDOWN = """# Plan of the answer

Some **bold**, some *italic*, ~~a retracted claim~~ and `inline code`.

1. First step
2. Second step
   - a nested point
   - another one

> A quoted line from the question.

A link to [the docs](https://docs.python.org/3/) and a bare line after it."""

CODE = """Five languages:

```python
def mean(values: list[float]) -> float:
    # the arithmetic mean
    return sum(values) / len(values)
```

```javascript
const total = items.reduce((a, b) => a + b, 0); // sum
```

```rust
fn main() { let x: u32 = 42; println!("{}", x); }
```

```sql
SELECT name, COUNT(*) FROM runs WHERE status = 'completed' GROUP BY name;
```

```bash
for f in *.csv; do echo "$f"; done
```"""

TABLE = """| Model | Accuracy | Cost |
|:------|---------:|:----:|
| gpt-x | 91.2 | $0.40 |
| llama | 84.0 | $0.02 |"""

LATEX = r"""The mean is $\bar{x} = \frac{1}{n}\sum_{i=1}^{n} x_i$ and, as chat models write it,
\(a^2 + b^2 = c^2\). A display formula:

$$\int_0^1 x^2\,dx = \frac{1}{3}$$

\[ \sigma = \sqrt{\frac{1}{n}\sum_i (x_i - \bar{x})^2} \]

It costs $5 and $10, which is no formula. A broken one: $\notacommand{x}$."""

RTL = """مرحبا بالعالم، هذه إجابة باللغة العربية مع كلمة English في وسطها.

שלום עולם, זו תשובה בעברית."""

CJK = """答案是B。因为光合作用需要阳光、水和二氧化碳。

日本語の回答です。한국어 답변입니다."""

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is **2 + 2**?"},
    {"role": "assistant", "content": "It is `4`.\n\n- because 2 + 2 = 4"},
]


def long_answer(chars: int = 20_000) -> str:
    """A Markdown answer of exactly `chars` characters, ending with a marker."""
    paragraph = "This is a long paragraph of a model's answer, repeated to fill the page. " * 4
    text = ""
    section = 0
    while len(text) < chars:
        section += 1
        text += f"## Section {section}\n\n{paragraph}\n\n"
    end = "THE END OF THE ANSWER"
    return text[: chars - len(end)] + end


HOLD_OUT = "\n\n".join([MARKDOWN, CODE, TABLE, LATEX, RTL, CJK])

# Markup and URLs that must stay inert: no script, no handler, no request leaves the site.
HOSTILE = [
    "<script>window.__xss = 11; document.title = 'pwned'</script>",
    '<img src=x onerror="window.__xss = 12">',
    "[click](javascript:window.__xss=13)",
    "[click](JaVaScRiPt:window.__xss=14)",
    "[click](&#106;avascript:window.__xss=15)",
    "[ref link][r]\n\n[r]: javascript:window.__xss=16",
    "<javascript:window.__xss=17>",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![pixel](https://tracker.invalid/pixel.png)",
    "![inline](data:image/png;base64,iVBORw0KGgo=)",
    '<div style="background:url(https://tracker.invalid/css.png)">styled</div>',
    "<style>body { background: url(https://tracker.invalid/style.png) }</style>",
    r"$\href{javascript:window.__xss=18}{x}$",
    r"$\text{<img src=x onerror=window.__xss=19>}$",
    "```html\n<script>window.__xss = 20</script>\n```",
    '<a href="https://tracker.invalid/" onclick="window.__xss=21">a</a>',
    '<svg onload="window.__xss = 22"></svg>',
    "<iframe src=https://tracker.invalid/frame></iframe>",
    "\u202eevil-bidi-override\u202c then text",
]
