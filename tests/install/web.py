"""A person's web session without a browser: it reads the forms a page shows, keeps their
defaults, fills in what a person would type and submits them, with cookies and CSRF as a
browser sends them. Used against a running install (bin/run), never a test client."""

from __future__ import annotations

import html
import http.cookiejar
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Form:
    action: str
    method: str
    # name → value for every field a browser would send as the page stands (checked boxes,
    # the selected option or the first one, textareas, hidden and text inputs).
    values: dict[str, str] = field(default_factory=dict)
    # name → [(value, label)] of each select, to choose options by what the user reads.
    options: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def choose(self, name: str, label_contains: str) -> str:
        """Select the first option of `name` whose label contains the text; returns its value."""
        for value, label in self.options.get(name, []):
            if label_contains in label:
                self.values[name] = value
                return value
        raise AssertionError(
            f"no option of {name!r} reads {label_contains!r}: {self.options.get(name)}"
        )


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._select: str | None = None
        self._option: tuple[str, bool] | None = None
        self._option_text = ""
        self._selected_seen: set[str] = set()
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", ""), a.get("method", "get").lower()))
            self._selected_seen = set()
            return
        if not self.forms:
            return
        form, name = self.forms[-1], a.get("name", "")
        if tag == "input" and name and "disabled" not in a:
            kind = a.get("type", "text").lower()
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    form.values[name] = a.get("value", "on")
            elif kind not in ("submit", "button", "file", "image", "reset"):
                form.values[name] = a.get("value", "")
        elif tag == "select" and name and "disabled" not in a:
            self._select = name
            form.options.setdefault(name, [])
        elif tag == "option" and self._select:
            self._option = (a.get("value", ""), "selected" in a)
            self._option_text = ""
        elif tag == "textarea" and name and "disabled" not in a:
            self._textarea, self._text = name, ""

    def handle_data(self, data: str) -> None:
        if self._option is not None:
            self._option_text += data
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if not self.forms:
            return
        form = self.forms[-1]
        if tag == "option" and self._select and self._option is not None:
            value, selected = self._option
            form.options[self._select].append((value, self._option_text.strip()))
            if selected or self._select not in form.values:
                if selected or self._select not in self._selected_seen:
                    form.values[self._select] = value
                if selected:
                    self._selected_seen.add(self._select)
            self._option = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            # A browser drops one newline right after <textarea>.
            form.values[self._textarea] = self._text.removeprefix("\n")
            self._textarea = None


@dataclass
class Page:
    url: str
    status: int
    text: str
    headers: dict[str, str]

    def forms(self) -> list[Form]:
        parser = _FormParser()
        parser.feed(self.text)
        for form in parser.forms:
            form.action = urllib.parse.urljoin(self.url, form.action or self.url)
        return parser.forms

    def form(self, action_contains: str = "") -> Form:
        """The first POST form whose action contains the text; when empty, the one that posts
        back to this page (the navigation's log-out form is everywhere)."""
        here = self.url.split("?")[0]
        for form in self.forms():
            target = form.action.split("?")[0]
            if form.method == "post" and (
                action_contains in form.action if action_contains else target == here
            ):
                return form
        raise AssertionError(f"no POST form with action ~ {action_contains!r} on {self.url}")

    def get_form(self, field_name: str) -> Form:
        """The first GET form (a filter or picker) with a field of that name."""
        for form in self.forms():
            if form.method == "get" and (field_name in form.values or field_name in form.options):
                return form
        raise AssertionError(f"no GET form with a field {field_name!r} on {self.url}")

    def text_only(self) -> str:
        """What a person reads: tags, scripts and styles dropped, whitespace collapsed."""
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", self.text, flags=re.S)
        return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))).strip()

    def links(self, pattern: str) -> list[str]:
        """Absolute URLs of every href matching the regex, in page order, without repeats."""
        found: list[str] = []
        for href in re.findall(r'href="([^"]+)"', self.text):
            url = urllib.parse.urljoin(self.url, href.replace("&amp;", "&"))
            if re.search(pattern, url) and url not in found:
                found.append(url)
        return found


class WebSession:
    """Cookies, CSRF and redirects as a browser handles them; no JavaScript."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def url(self, path: str) -> str:
        return urllib.parse.urljoin(self.base_url, path.lstrip("/"))

    def _open(self, request: urllib.request.Request, expect: int | None) -> Page:
        try:
            with self.opener.open(request, timeout=60) as response:
                page = Page(
                    response.geturl(),
                    response.status,
                    response.read().decode("utf-8"),
                    dict(response.headers),
                )
        except urllib.error.HTTPError as error:
            page = Page(
                error.url, error.code, error.read().decode("utf-8", "replace"), dict(error.headers)
            )
        if expect is not None:
            assert page.status == expect, (
                f"{request.get_method()} {request.full_url} → {page.status}:\n{page.text[:3000]}"
            )
        return page

    def get(self, path: str, expect: int | None = 200) -> Page:
        return self._open(urllib.request.Request(self.url(path)), expect)

    def post(self, url: str, values: dict[str, str], expect: int | None = 200) -> Page:
        body = urllib.parse.urlencode(values).encode()
        request = urllib.request.Request(self.url(url), data=body, method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        request.add_header("Referer", self.url(url))
        return self._open(request, expect)

    def submit(self, form: Form, expect: int | None = 200, **values: str) -> Page:
        """Submit the form with its defaults, changed by `values` (after any redirect)."""
        return self.post(form.action, {**form.values, **values}, expect)

    def search(self, form: Form, **values: str) -> Page:
        """Send a GET form (filters, pickers) with its defaults changed by `values`."""
        query = urllib.parse.urlencode({**form.values, **values})
        return self.get(form.action.split("?")[0] + "?" + query)

    def login(self, username: str, password: str) -> Page:
        page = self.get("/accounts/login/")
        landed = self.submit(page.form("/accounts/login/"), username=username, password=password)
        assert "/accounts/login/" not in landed.url, (
            f"login as {username} failed:\n{landed.text[:2000]}"
        )
        return landed


# ---- evalsite's run page ---------------------------------------------------------------
def wait_for_run(web: WebSession, url: str, timeout: float = 120) -> Page:
    """Reload the run page until its status badge says the run has ended."""
    deadline = time.monotonic() + timeout
    while True:
        page = web.get(url)
        status = re.search(r'id="run-status" data-status="([a-z_]+)"', page.text)
        assert status, page.text[:2000]
        if status.group(1) not in ("queued", "running"):
            return page
        assert time.monotonic() < deadline, f"{url} still {status.group(1)}:\n{page.text_only()}"
        time.sleep(0.5)


def counters(page: Page) -> tuple[int, int, int]:
    """(done, failed, total) as the run page shows them."""
    text = page.text_only()
    found = re.search(r"Done (\d+) Failed items (\d+) Not run \d+ Total (\d+)", text)
    assert found, text
    return tuple(int(n) for n in found.groups())  # type: ignore[return-value]
