"""Prompt templates rendered in a sandbox, and seeded few-shot examples.

A template is Django template syntax over *plain data only*: item fields arrive as str,
numbers, and read-only wrappers around lists and dicts (`DataMap`, `DataList`) that answer
key/index lookups and nothing else. There is no model object, no settings, no request in
the context; names starting with "_" are refused by the template parser itself; the tag
set is an allow-list (no `include`, `load`, `debug`, `url`, `csrf_token`); no loader exists,
so no file can be read. Output is plain text (no HTML escaping: it goes to a model).

Variables: each item field by name (`{{ question }}`), `item` (all fields: `{{ item.question }}`),
`key`, `position`, `reference`, `tags`, `conversation` (a conversation item's messages as one
text, "Role: content" per message), and with few-shot `examples` (the examples, each
written with the example format and joined by blank lines) and `fewshot` (the examples as
data). When k > 0 and neither message mentions `examples`/`fewshot`, the examples go before
the user message.

A template is either a system + user message (the first kind, kept as it rendered), or a list
of chat messages (`PromptTemplate.messages`): system, user and assistant messages, each a
template (few-shot turns are assistant messages), and at most one `{"role": "conversation"}`
entry that stands for the item's conversation (apps/datasets/conversations.py) as recorded.
A multi-turn run sends the messages before it, then the dialogue so far (apps/runs/turns.py).
A template that fails to compile or render names the message, the line and (rendering) the item.

Few-shot draws are deterministic per (template name and seed, item): `random.Random` seeded
with a string (hashed with SHA-512, so the same in every process), and never the item itself.
"""

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.template import Context, Library, TemplateSyntaxError, defaultfilters, defaulttags
from django.template.base import Template
from django.template.engine import Engine

from apps.datasets.conversations import conversation_text
from apps.datasets.models import Dataset, Item
from apps.datasets.values import as_text
from apps.runs.turns import dialogue

# ---- the sandbox -----------------------------------------------------------------------------
register = Library()
_TAGS = [
    "autoescape",
    "comment",
    "cycle",
    "filter",
    "firstof",
    "for",
    "if",
    "ifchanged",
    "now",
    "regroup",
    "resetcycle",
    "spaceless",
    "templatetag",
    "verbatim",
    "widthratio",
    "with",
]
for _name in _TAGS:
    register.tags[_name] = defaulttags.register.tags[_name]
for _name, _func in defaultfilters.register.filters.items():
    if _name not in {"pprint", "safe", "safeseq"}:
        register.filters[_name] = _func

MISSING = "\x00missing:%s\x00"
_MISSING_RE = re.compile("\x00missing:([^\x00]*)\x00")
_FEWSHOT_RE = re.compile(r"\{[{%][^}]*\b(?:examples|fewshot)\b")


class _SandboxEngine(Engine):
    default_builtins: ClassVar[list[str]] = []


def _engine(string_if_invalid: str) -> Engine:
    return _SandboxEngine(
        loaders=[],
        builtins=["apps.runs.prompts"],
        libraries={},
        autoescape=False,
        string_if_invalid=string_if_invalid,
        # Errors carry the line they happened on (`template_debug`); nothing else changes.
        debug=True,
    )


_ENGINE: Engine | None = None
_PREVIEW_ENGINE: Engine | None = None


def engine(preview: bool = False) -> Engine:
    global _ENGINE, _PREVIEW_ENGINE
    if preview:
        _PREVIEW_ENGINE = _PREVIEW_ENGINE or _engine(MISSING)
        return _PREVIEW_ENGINE
    _ENGINE = _ENGINE or _engine("")
    return _ENGINE


class PromptError(Exception):
    """A template that cannot be compiled or rendered; the message says where."""


class DataMap:
    """A read-only dict for templates: `{{ m.key }}` works, Python attributes do not exist."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return plain(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __str__(self) -> str:
        return as_text(self._data)


class DataList:
    """A read-only list for templates: iteration and `{{ l.0 }}`, nothing else."""

    __slots__ = ("_data",)

    def __init__(self, data: Sequence[Any]) -> None:
        self._data = data

    def __getitem__(self, index: int | str) -> Any:
        if isinstance(index, str):
            if not index.lstrip("-").isdigit():
                raise KeyError(index)
            index = int(index)
        return plain(self._data[index])

    def __iter__(self) -> Iterator[Any]:
        return (plain(value) for value in self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __str__(self) -> str:
        # JSON, as judge prompts and pages show a list field (`as_text`): comma-joining lost
        # the brackets and merged items that contain commas (#28.6).
        return as_text(list(self._data))


def plain(value: Any) -> Any:
    """Only str, numbers, bools and the read-only wrappers ever reach a template."""
    if value is None:
        return ""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, DataMap | DataList):
        return value
    if isinstance(value, dict):
        return DataMap(value)
    if isinstance(value, list | tuple):
        return DataList(value)
    return str(value)


def _line(exc: BaseException) -> str:
    """ " line N" of a template error, from Django's debug information ("" without it)."""
    info = getattr(exc, "template_debug", None)
    if not isinstance(info, dict) or not info.get("line"):
        return ""
    line = f"line {info['line']}"
    return "" if line in str(exc) else f" {line}"  # some messages say it already


def compile_template(source: str, what: str = "template") -> Template:
    try:
        return engine().from_string(source)
    except TemplateSyntaxError as exc:
        raise PromptError(f"{what}{_line(exc)}: {exc}") from None


# A chat template's stand-in for the item's conversation (PromptTemplate.messages).
CONVERSATION = "conversation"
TEMPLATE_ROLES = ("system", "user", "assistant", CONVERSATION)


def message_label(number: int, role: str) -> str:
    """How errors name a chat template's message: "Message 2 (assistant)"."""
    return f"Message {number} ({role})"


def check_messages(messages: Any) -> list[str]:
    """Plain-words problems of a chat template's message list (empty when it is fine)."""
    if not isinstance(messages, list) or not messages:
        return ["A chat template is a non-empty list of messages."]
    errors = []
    conversations = 0
    for number, message in enumerate(messages, 1):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in TEMPLATE_ROLES:
            errors.append(
                f"Message {number}: role {role!r} is not one of {', '.join(TEMPLATE_ROLES)}."
            )
            continue
        if role == CONVERSATION:
            conversations += 1
            continue
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            errors.append(f"{message_label(number, role)} is empty.")
            continue
        errors.extend(validate_template_sources((message_label(number, role), content)))
    if conversations > 1:
        errors.append("The item's conversation can be sent once per template.")
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    if CONVERSATION not in roles and "user" not in roles:
        errors.append("A chat template needs a user message or the item's conversation.")
    return errors


# ---- items as plain data -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ItemData:
    """What a prompt may see of an item (loaded with values(), never a model instance)."""

    id: int
    dataset_id: int
    key: str
    position: int
    fields: dict[str, Any]
    reference: str = ""
    tags: list[str] = field(default_factory=list)
    # Canonical chat messages (Item.conversation); [] for a plain item.
    conversation: list[dict[str, Any]] = field(default_factory=list)

    VALUES = ("id", "dataset_id", "key", "position", "fields", "reference", "tags", "conversation")

    @classmethod
    def from_values(cls, row: dict[str, Any]) -> "ItemData":
        return cls(**{name: row[name] for name in cls.VALUES})


RESERVED = {"item", "key", "position", "reference", "tags", "examples", "fewshot"}


def item_context(item: ItemData) -> dict[str, Any]:
    context: dict[str, Any] = {
        name: plain(value)
        for name, value in item.fields.items()
        if isinstance(name, str) and name.isidentifier() and name not in RESERVED
    }
    context.update(
        item=DataMap(item.fields),
        key=item.key,
        position=item.position,
        reference=item.reference or "",
        tags=DataList(item.tags or []),
    )
    if item.conversation:
        # The one way a conversation reads as text (Item.conversation_text), for a single
        # message that quotes it.
        context["conversation"] = conversation_text(item.conversation)
    return context


# ---- few-shot ------------------------------------------------------------------------------------
class FewshotPool:
    """The items examples are drawn from, loaded once per chunk."""

    def __init__(self, items: list[ItemData], input_columns: list[str]) -> None:
        self.items = items
        self.input_columns = input_columns

    @classmethod
    def load(cls, dataset_id: int) -> "FewshotPool":
        dataset = Dataset.objects.get(pk=dataset_id)
        rows = (
            Item.objects.filter(dataset_id=dataset_id).order_by("position").values(*ItemData.VALUES)
        )
        return cls([ItemData.from_values(row) for row in rows], dataset.input_columns)

    def draw(self, item: ItemData, k: int, seed_text: str) -> list[ItemData]:
        """k examples, the same for the same seed text and item, never the item itself."""
        if k <= 0 or not self.items:
            return []
        rng = random.Random(f"{seed_text}:{item.dataset_id}:{item.key}")
        # Draw one spare so dropping the item itself still leaves k.
        picks = rng.sample(range(len(self.items)), min(k + 1, len(self.items)))
        chosen = [
            self.items[i]
            for i in picks
            if self.items[i].id != item.id and self.items[i].fields != item.fields
        ]
        return chosen[:k]


def default_example_format(input_columns: list[str]) -> str:
    lines = [f"{col}: {{{{ item.{col} }}}}" for col in input_columns if col.isidentifier()]
    return "\n".join(lines or ["{{ item }}"]) + "\nAnswer: {{ reference }}"


# ---- rendering ---------------------------------------------------------------------------------
@dataclass
class Rendered:
    messages: list[dict[str, Any]]
    missing: list[str]  # variables the template used that this item does not have
    examples: list[ItemData]


class PromptRenderer:
    """Compiles a template version once and renders chat messages for many items."""

    def __init__(self, template: Any, pool: FewshotPool | None = None) -> None:
        self.template = template
        self.chat = list(template.messages or [])
        # (role, label, compiled template; None for the conversation), in order.
        self.parts: list[tuple[str, str, Template | None]] = []
        if self.chat:
            if problems := check_messages(self.chat):
                raise PromptError(problems[0])
            for number, message in enumerate(self.chat, 1):
                role = message["role"]
                label = message_label(number, role)
                compiled = (
                    None if role == CONVERSATION else compile_template(message["content"], label)
                )
                self.parts.append((role, label, compiled))
            sources = "".join(str(m.get("content", "")) for m in self.chat)
        else:
            for role, label, source in (
                ("system", "System message", template.system_message),
                ("user", "User message", template.user_message),
            ):
                self.parts.append((role, label, compile_template(source or "", label)))
            sources = (template.system_message or "") + (template.user_message or "")
        self.k = template.fewshot_k if template.fewshot_k else 0
        self.pool = pool
        self.seed_text = f"{template.task_id}:{template.name}:{template.fewshot_seed}"
        fmt = template.fewshot_format or ""
        if self.k and not fmt.strip():
            fmt = default_example_format(pool.input_columns if pool else [])
        self.example = compile_template(fmt, "Example format") if self.k else None
        self.inline_examples = bool(_FEWSHOT_RE.search(sources))

    @property
    def sends_conversation(self) -> bool:
        """Whether the template sends the item's conversation (what multi-turn runs need)."""
        return any(role == CONVERSATION for role, _, _ in self.parts)

    @property
    def ends_with_conversation(self) -> bool:
        return bool(self.parts) and self.parts[-1][0] == CONVERSATION

    @classmethod
    def for_template(cls, template: Any, item_dataset_id: int | None = None) -> "PromptRenderer":
        pool = None
        if template.fewshot_k:
            dataset_id = template.fewshot_dataset_id or item_dataset_id
            pool = FewshotPool.load(dataset_id) if dataset_id else None
        return cls(template, pool)

    def render(
        self,
        item: ItemData,
        preview: bool = False,
        *,
        turn: int | None = None,
        answers: Sequence[str] = (),
    ) -> Rendered:
        """The messages for `item`; with `turn` n (a multi-turn run), the item's conversation
        stands as turn n is asked: up to its n-th user message, `answers` to the turns before
        it in place of what the file recorded (apps/runs/turns.py)."""
        try:
            return self._render(item, preview, turn, list(answers))
        except PromptError:
            raise
        except Exception as exc:  # a filter failing on this item's data
            raise PromptError(f"Rendering failed on item {item.key}: {exc}") from exc

    def _render(
        self, item: ItemData, preview: bool, turn: int | None, answers: list[str]
    ) -> Rendered:
        context = item_context(item)
        examples = self.pool.draw(item, self.k, self.seed_text) if self.pool and self.k else []
        missing: list[str] = []
        if examples and self.example is not None:
            blocks = [
                self._text(self.example, item_context(ex), preview, missing, "Example format", item)
                for ex in examples
            ]
            context["examples"] = "\n\n".join(blocks)
            context["fewshot"] = DataList(
                [{**ex.fields, "reference": ex.reference} for ex in examples]
            )
        else:
            context["examples"] = ""
            context["fewshot"] = DataList([])
        messages: list[dict[str, Any]] = []
        for role, label, compiled in self.parts:
            if compiled is None:
                messages.extend(self._conversation(item, turn, answers))
                continue
            text = self._text(compiled, context, preview, missing, label, item)
            if role == "system" and not text.strip():
                continue  # a system message with nothing to say (or a false condition)
            messages.append({"role": role, "content": text})
        if context["examples"] and not self.inline_examples:
            first_user = next((m for m in messages if m["role"] == "user"), None)
            if first_user is not None:
                first_user["content"] = f"{context['examples']}\n\n{first_user['content']}"
        return Rendered(messages, sorted(set(missing)), examples)

    @staticmethod
    def _conversation(item: ItemData, turn: int | None, answers: list[str]) -> list[dict[str, Any]]:
        if not item.conversation:
            raise PromptError(
                f"Item {item.key} has no conversation: the template sends the item's "
                "conversation, and the dataset maps no conversation column (or this row's is empty)."
            )
        if turn is None:
            return [dict(m) for m in item.conversation]
        return dialogue(item.conversation, answers, upto=turn)

    @staticmethod
    def _text(
        template: Template,
        data: dict[str, Any],
        preview: bool,
        missing: list[str],
        label: str = "",
        item: ItemData | None = None,
    ) -> str:
        try:
            if not preview:
                return template.render(Context(data, autoescape=False))
            # Render with the marking engine so unknown names can be reported, then drop marks.
            marked = engine(preview=True).from_string(template.source)
            text = marked.render(Context(data, autoescape=False))
        except Exception as exc:
            where = f" on item {item.key}" if item is not None else ""
            raise PromptError(f"Rendering failed{where}: {label}{_line(exc)}: {exc}") from exc
        missing.extend(_MISSING_RE.findall(text))
        return _MISSING_RE.sub("", text)


def validate_template_sources(*sources: tuple[str, str]) -> list[str]:
    """Compile each (label, source); return plain-words errors (empty when all compile)."""
    errors = []
    for label, source in sources:
        try:
            compile_template(source, label)
        except PromptError as exc:
            errors.append(str(exc))
    return errors


def fits(template: Any, dataset: Dataset) -> bool:
    """Whether the dataset's first item has every field the template uses."""
    row = dataset.items.order_by("position").values(*ItemData.VALUES).first()
    if row is None:
        return False
    try:
        rendered = PromptRenderer.for_template(template, dataset.pk).render(
            ItemData.from_values(row), preview=True
        )
    except PromptError:
        return False
    return not rendered.missing
