import re
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.text import normalize_newlines

from apps.datasets.models import Dataset, Task
from apps.runs.engine.budget import check_budget
from apps.runs.kinds.generation import multi_turn_refusal
from apps.runs.models import (
    ChoiceSetup,
    Endpoint,
    LoggingMode,
    PromptTemplate,
    Run,
    ScriptSetup,
    SimulatorSetup,
)
from apps.runs.prompts import (
    ItemData,
    PromptError,
    PromptRenderer,
    check_messages,
    validate_template_sources,
)
from apps.runs.response_schema import clean_schema

RESERVED_PARAMS = {"model", "messages", "stream", "n"}


class PromptTextField(forms.CharField):
    """Prompt text with LF line ends, as it is stored and sent.

    Browsers submit a textarea's line breaks as CRLF (the HTML spec says so), which would mix
    line endings inside prompts; CRLF and lone CR become LF here, before any validation. Used
    by every form that saves prompt text (templates here, judges in apps.judges.forms). Only
    new versions pass through a form: what older versions recorded stays as it was sent.
    """

    def to_python(self, value: Any) -> str:
        return normalize_newlines(super().to_python(value) or "")


class EndpointForm(forms.ModelForm):
    """The stored key is write-only: the form never renders it, only whether it is set."""

    new_api_key = forms.CharField(
        required=False,
        label="API key to store",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored and used instead of the environment variable. Never shown again.",
    )
    clear_api_key = forms.BooleanField(
        required=False, label="Forget the stored key (use the environment variable again)"
    )
    extra_params = forms.JSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='Passed through in the request body, e.g. {"stop": ["\\n\\n"]}.',
    )

    class Meta:
        model = Endpoint
        fields = [
            "name",
            "base_url",
            "model",
            "family",
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "extra_params",
            "api_key_env",
            "concurrency_limit",
            "rpm_limit",
            "tpm_limit",
            "timeout_seconds",
            "max_retries",
            "supports_structured_output",
            "supports_batch",
        ]
        labels = {
            "base_url": "Base URL",
            "api_key_env": "API key environment variable",
            "rpm_limit": "Requests per minute (blank: as the provider states)",
            "tpm_limit": "Tokens per minute (blank: as the provider states)",
            "timeout_seconds": "Timeout per request (seconds)",
        }
        help_texts = {
            "base_url": "The server's OpenAI-compatible API root, e.g. https://api.openai.com/v1 or "
            "http://localhost:8000/v1 (vLLM, Ollama, LiteLLM). Blank means OpenAI "
            "(or $OPENAI_BASE_URL).",
            "rpm_limit": "The provider's limit for this key and model; every worker shares it. "
            "Runs also keep to the limits the provider states in its x-ratelimit-limit-* "
            "headers, whichever is lower.",
            "tpm_limit": "Counted like OpenAI: the prompt (estimated before sending, corrected "
            "from the reply's usage) plus Max tokens (256 when blank, then the reply's real "
            "length). Every worker shares it.",
            "api_key_env": "When no key is stored, the web server and the workers read the key "
            "from this environment variable.",
        }
        widgets = {"base_url": forms.URLInput(attrs={"placeholder": "https://api.openai.com/v1"})}

    # The key's fields together, right after what they authenticate against.
    field_order = ["name", "base_url", "model", "new_api_key", "clear_api_key", "api_key_env"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["concurrency_limit"].validators.append(MinValueValidator(1))
        self.fields["rpm_limit"].validators.append(MinValueValidator(1))
        self.fields["tpm_limit"].validators.append(MinValueValidator(1))
        self.fields["timeout_seconds"].validators.append(MinValueValidator(0.1))
        self.fields["max_retries"].validators.append(MinValueValidator(0))
        if not self.instance.has_secret:
            del self.fields["clear_api_key"]

    def clean_extra_params(self) -> dict[str, Any]:
        value = self.cleaned_data.get("extra_params") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object, e.g. {"stop": ["END"]}.')
        clash = sorted(RESERVED_PARAMS & set(value))
        if clash:
            raise forms.ValidationError(f"These are set by evalsite itself: {', '.join(clash)}.")
        return value

    def clean_family(self) -> str:
        """One spelling per family, so "OpenAI" and "openai " are the same model maker."""
        return " ".join(self.cleaned_data.get("family", "").split()).lower()

    def clean_api_key_env(self) -> str:
        value = (self.cleaned_data.get("api_key_env") or "").strip()
        if value and not value.replace("_", "").isalnum():
            raise forms.ValidationError("Use an environment variable name like OPENAI_API_KEY.")
        return value or "OPENAI_API_KEY"

    def save(self, commit: bool = True) -> Endpoint:
        endpoint = super().save(commit=False)
        if self.cleaned_data.get("new_api_key"):
            endpoint.api_key_secret = self.cleaned_data["new_api_key"]
        elif self.cleaned_data.get("clear_api_key"):
            endpoint.api_key_secret = ""
        if commit:
            endpoint.save()
        return endpoint


PLAIN, CONVERSATION, CHAT = "plain", "conversation", "chat"
SHAPES = [
    (PLAIN, "A system message and a user message over the item's fields"),
    (CONVERSATION, "The item's conversation, after the system message (if any)"),
    (CHAT, "A list of chat messages (few-shot turns, the item's conversation anywhere)"),
]
# How a chat template's messages are written in the editor: a line holding only a role in
# brackets starts a message; "[conversation]" alone stands for the item's conversation.
_MARKER = re.compile(r"^\[(system|user|assistant|conversation)\]\s*$", re.IGNORECASE)


def chat_text(messages: list[dict[str, Any]]) -> str:
    """A chat template's messages as the editor writes them (`parse_chat_text` reads it back)."""
    blocks = []
    for message in messages:
        role = message.get("role", "")
        blocks.append(f"[{role}]" if role == CONVERSATION else f"[{role}]\n{message['content']}")
    return "\n".join(blocks)


def parse_chat_text(text: str) -> list[dict[str, Any]]:
    """The editor's chat messages: each starts at a line "[system]", "[user]", "[assistant]"
    or "[conversation]"; the lines up to the next such line are its content (the blank lines
    around it dropped). Text before the first marker is an error, named by its line."""
    messages: list[dict[str, Any]] = []
    for number, line in enumerate(normalize_newlines(text).split("\n"), 1):
        if match := _MARKER.match(line.strip()):
            role = match[1].lower()
            messages.append({"role": role} if role == CONVERSATION else {"role": role, "lines": []})
        elif not messages:
            if line.strip():
                raise forms.ValidationError(
                    f"Line {number}: start each message with a line of its own saying whose it "
                    "is: [system], [user], [assistant], or [conversation] for the item's."
                )
        elif messages[-1]["role"] == CONVERSATION:
            if line.strip():
                raise forms.ValidationError(
                    f"Line {number}: [conversation] stands for the item's conversation and has "
                    "no text of its own; start a message ([user]…) for this text."
                )
        else:
            messages[-1]["lines"].append(line)
    for message in messages:
        if "lines" in message:
            message["content"] = "\n".join(message.pop("lines")).strip("\n")
    return messages


class PromptTemplateForm(forms.ModelForm):
    shape = forms.ChoiceField(
        choices=SHAPES,
        required=False,  # left out (forms made before chat templates): system + user message
        initial=PLAIN,
        label="Messages",
        widget=forms.RadioSelect,
    )
    chat_messages = PromptTextField(
        required=False,
        label="Chat messages",
        widget=forms.Textarea(attrs={"rows": 10}),
        help_text="Each message starts with a line of its own: [system], [user] or "
        "[assistant] (a few-shot answer), then its text (a template, like the messages "
        "above). A line [conversation] sends the item's conversation there.",
    )

    class Meta:
        model = PromptTemplate
        fields = [
            "name",
            "shape",
            "system_message",
            "user_message",
            "chat_messages",
            "fewshot_k",
            "fewshot_dataset",
            "fewshot_seed",
            "fewshot_format",
        ]
        labels = {
            "fewshot_k": "Few-shot examples (k)",
            "fewshot_dataset": "Draw examples from",
            "fewshot_seed": "Seed",
            "fewshot_format": "Example format",
        }
        field_classes = {
            "system_message": PromptTextField,
            "user_message": PromptTextField,
            "fewshot_format": PromptTextField,
        }
        help_texts = {
            "user_message": "Item fields by name: {{ question }}, or {{ item.question }}.",
            "fewshot_dataset": "Blank: the run's own dataset (never the item itself).",
            "fewshot_format": "Over the example's fields, e.g. Q: {{ question }}\nA: {{ reference }}",
        }
        widgets = {
            "system_message": forms.Textarea(attrs={"rows": 4}),
            "user_message": forms.Textarea(attrs={"rows": 8}),
            "fewshot_format": forms.Textarea(attrs={"rows": 3}),
        }

    def __init__(self, *args: Any, task: Task, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        cast(
            forms.ModelChoiceField, self.fields["fewshot_dataset"]
        ).queryset = Dataset.objects.ready().filter(task=task)
        self.fields["fewshot_k"].validators.append(MaxValueValidator(50))
        self.fields[
            "system_message"
        ].help_text = "Optional. With the item's conversation, it goes before the conversation."
        self.fields["user_message"].help_text = (
            "Item fields by name: {{ question }}, or {{ item.question }}. Not sent with the "
            "item's conversation or chat messages."
        )
        if editing:
            # A new version keeps the name: versions are what an edit makes.
            self.fields["name"].disabled = True
        messages = list(self.instance.messages or []) if self.instance else []
        if messages and not self.is_bound:
            roles = [m.get("role") for m in messages]
            if roles in ([CONVERSATION], ["system", CONVERSATION]):
                self.initial["shape"] = CONVERSATION
                self.initial["system_message"] = messages[0]["content"] if len(roles) == 2 else ""
            else:
                self.initial["shape"] = CHAT
                self.initial["chat_messages"] = chat_text(messages)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if (
            not self.fields["name"].disabled
            and PromptTemplate.objects.filter(task=self.task, name=name).exists()
        ):
            raise forms.ValidationError(
                "A template with this name exists in this task; edit it to make a new version."
            )
        return name

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        shape = data.get("shape") or PLAIN
        system = data.get("system_message") or ""
        messages: list[dict[str, Any]] = []
        if shape == CONVERSATION:
            messages = [{"role": "system", "content": system}] if system.strip() else []
            messages.append({"role": CONVERSATION})
        elif shape == CHAT:
            try:
                messages = parse_chat_text(data.get("chat_messages") or "")
            except forms.ValidationError as exc:
                self.add_error("chat_messages", exc)
                return data
            for problem in check_messages(messages):
                self.add_error("chat_messages", problem)
        elif not (data.get("user_message") or "").strip():
            self.add_error("user_message", "Write the user message (the question sent per item).")
        data["messages"] = messages
        if messages:
            # One place for the wording: the messages (the fields above would only mislead).
            data["system_message"] = data["user_message"] = ""
        sources = [("Example format", data.get("fewshot_format") or "")]
        if shape == PLAIN:
            sources[:0] = [
                ("System message", system),
                ("User message", data.get("user_message") or ""),
            ]
        elif shape == CONVERSATION:
            sources.insert(0, ("System message", system))
        for error in validate_template_sources(*sources):
            self.add_error(None, error)
        return data

    def save(self, commit: bool = True) -> PromptTemplate:
        template = super().save(commit=False)
        template.messages = self.cleaned_data.get("messages") or []
        template.system_message = self.cleaned_data.get("system_message") or ""
        template.user_message = self.cleaned_data.get("user_message") or ""
        if commit:
            template.save()
        return template


def batch_field() -> forms.BooleanField:
    """The batch-mode option of every start form that asks a model."""
    return forms.BooleanField(
        required=False,
        label="Batch mode",
        help_text="Send the requests as a batch through the provider's Batch API: answered "
        "within 24 h at the batch price. Only for endpoints marked as supporting it.",
    )


def check_batch(form: forms.Form, endpoint: Endpoint | None) -> None:
    """Batch mode on an endpoint that does not support it: an error on the option."""
    refusal = endpoint.batch_refusal() if endpoint is not None else ""
    if form.cleaned_data.get("batch") and refusal:
        form.add_error("batch", refusal)


CACHE_CHOICES = [
    ("", "Default"),
    ("on", "Reuse replies to identical requests"),
    ("off", "Send every request"),
]


class CostFields(forms.Form):
    """The response cache and the budget cap, on every start form (#16.4, #16.5)."""

    use_cache = forms.ChoiceField(
        choices=CACHE_CHOICES,
        required=False,
        label="Response cache",
        help_text="Default: on for judges; for generation, on only when the endpoint's "
        "requests are deterministic as sent (temperature 0 set explicitly, or a seed). With "
        "temperature unset the provider samples at its own default, so a rerun asks anew. "
        "Cached requests cost $0.",
    )
    budget_usd = forms.DecimalField(
        required=False,
        min_value=Decimal("0.0001"),
        max_digits=12,
        decimal_places=4,
        label="Budget (USD)",
        help_text="Optional: the run stops cleanly before its cost could pass this; resume "
        "with a larger budget to go on.",
    )

    def cache_choice(self) -> bool | None:
        return {"on": True, "off": False}.get(self.cleaned_data.get("use_cache") or "")

    def check_budget(self, endpoint: Endpoint | None) -> None:
        try:
            check_budget(self.cleaned_data.get("budget_usd"), endpoint)
        except ValueError as exc:
            self.add_error("budget_usd", str(exc))
            return
        if self.cleaned_data.get("batch") and self.cleaned_data.get("budget_usd"):
            # A batch goes to the provider whole: there is no request to stop before.
            self.add_error("budget_usd", "A budget cannot stop a batch: leave one of them out.")


class GenerationRunForm(CostFields):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all())
    template = forms.ModelChoiceField(
        queryset=PromptTemplate.objects.none(), label="Prompt template version"
    )
    label = forms.CharField(
        required=False, max_length=200, help_text="The model's name on leaderboards."
    )
    epochs = forms.IntegerField(
        required=False,  # left out: one answer per item
        min_value=1,
        max_value=Run.MAX_EPOCHS,
        initial=1,
        help_text=(
            "Answers per item. With more than one, boards offer the mean over epochs, pass@k "
            "and majority vote, and list the flaky items; with a seed on the endpoint, epoch e "
            "is asked with seed + e."
        ),
    )
    multi_turn = forms.BooleanField(
        required=False,
        label="Ask turn by turn (multi-turn)",
        help_text="For conversation datasets: each user turn is asked in order, with the "
        "model's own earlier answers in context (as MT-Bench asks). The template must send "
        "the item's conversation.",
    )
    logging_mode = forms.ChoiceField(choices=LoggingMode.choices, initial=LoggingMode.FAILED)
    chunk_size = forms.IntegerField(
        min_value=1, max_value=10_000, initial=200, help_text="Items per background job."
    )
    batch = batch_field()
    response_schema = forms.JSONField(
        required=False,
        label="Each response must be JSON with",
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": '{"keys": {"pred": "string"}, "answer": "pred"}'}
        ),
        help_text=(
            "Optional (Dynabench's verify_response): the keys each response must have and their "
            "types (string, number, integer, boolean, array, object, any); “answer” names the "
            "key judges score. A response that is not such JSON is marked invalid with the "
            "reason, and judges fail its item (strict boards count it at the worst value)."
        ),
    )

    def __init__(self, *args: Any, task: Task, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        cast(
            forms.ModelChoiceField, self.fields["dataset"]
        ).queryset = Dataset.objects.ready().filter(task=task)
        cast(
            forms.ModelChoiceField, self.fields["template"]
        ).queryset = PromptTemplate.objects.filter(task=task).order_by("name", "-version")

    field_order = [
        "dataset",
        "endpoint",
        "template",
        "multi_turn",
        "label",
        "epochs",
        "use_cache",
        "budget_usd",
        "logging_mode",
        "chunk_size",
        "batch",
        "response_schema",
    ]

    def clean_epochs(self) -> int:
        return self.cleaned_data.get("epochs") or 1

    def clean_response_schema(self) -> dict[str, Any]:
        try:
            return clean_schema(self.cleaned_data.get("response_schema"))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def unsaved_run(self) -> Run:
        """The run these choices make, unsaved (for the cost estimate)."""
        data = self.cleaned_data
        use_cache = self.cache_choice()
        return Run(
            task=self.task,
            kind=Run.Kind.GENERATION,
            dataset=data["dataset"],
            endpoint=data["endpoint"],
            template=data["template"],
            epochs=data.get("epochs") or 1,
            multi_turn=bool(data.get("multi_turn")),
            use_cache=Run.default_use_cache(Run.Kind.GENERATION, data["endpoint"])
            if use_cache is None
            else use_cache,
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        check_batch(self, data.get("endpoint"))
        if data.get("endpoint") is not None:
            self.check_budget(data["endpoint"])
        dataset, template = data.get("dataset"), data.get("template")
        if dataset is None or template is None:
            return data
        if data.get("multi_turn") and (refusal := multi_turn_refusal(dataset, template)):
            self.add_error("multi_turn", refusal)
            return data
        first = dataset.items.order_by("position").values(*ItemData.VALUES).first()
        if first is None:
            raise forms.ValidationError("This dataset has no items.")
        try:
            rendered = PromptRenderer.for_template(template, dataset.pk).render(
                ItemData.from_values(first), preview=True
            )
        except PromptError as exc:
            raise forms.ValidationError(str(exc)) from None
        if rendered.missing:
            raise forms.ValidationError(
                f"The template uses {', '.join(rendered.missing)}, which item "
                f"{first['key']} of this dataset does not have."
            )
        return data


class ChoiceRunForm(forms.Form):
    """Choice scoring by log-likelihood (apps/runs/kinds/choices.py). The endpoint is probed when the
    run is created (`create_choice_run`), so its refusal shows on this form."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    endpoint = forms.ModelChoiceField(
        queryset=Endpoint.objects.all(),
        help_text="Its completions API must return prompt log-probabilities (echo + logprobs), "
        "as vLLM serves; a chat-only endpoint is refused before the run starts.",
    )
    template = forms.ModelChoiceField(
        queryset=PromptTemplate.objects.none(),
        label="Prompt template version",
        help_text="The context: its messages joined by a blank line; each option follows "
        "after one space.",
    )
    option_columns = forms.CharField(
        required=False,
        max_length=2000,
        help_text="In label order, comma-separated (one column may hold a list of options). "
        "Blank: the columns named A, B, C… or 1, 2, 3…",
    )
    label_type = forms.ChoiceField(
        required=False,
        label="Option labels",
        choices=[("", "As the option columns are named"), *ChoiceSetup.LabelType.choices],
    )
    label = forms.CharField(
        required=False, max_length=200, help_text="The model's name on leaderboards."
    )
    logging_mode = forms.ChoiceField(choices=LoggingMode.choices, initial=LoggingMode.FAILED)
    chunk_size = forms.IntegerField(
        min_value=1, max_value=10_000, initial=200, help_text="Items per background job."
    )

    def __init__(self, *args: Any, task: Task, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        cast(
            forms.ModelChoiceField, self.fields["dataset"]
        ).queryset = Dataset.objects.ready().filter(task=task)
        cast(
            forms.ModelChoiceField, self.fields["template"]
        ).queryset = PromptTemplate.objects.filter(task=task).order_by("name", "-version")

    def clean_option_columns(self) -> list[str]:
        text = self.cleaned_data.get("option_columns") or ""
        return [column.strip() for column in text.split(",") if column.strip()]


class DialogueRunForm(CostFields):
    """What memory-script and simulated-conversation runs share (`start_run script` /
    `simulation`, POST /api/v1/runs/script/ and /simulation/): refusals that need the items
    (a row that is not a script, a template that does not compile) come from the run's
    creation and show on the form."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all(), label="Model's endpoint")
    label = forms.CharField(
        required=False, max_length=200, help_text="The model's name on leaderboards."
    )
    epochs = forms.IntegerField(
        min_value=1,
        max_value=Run.MAX_EPOCHS,
        initial=1,
        help_text="Each item's conversation held this many times (sampling varies).",
    )
    logging_mode = forms.ChoiceField(choices=LoggingMode.choices, initial=LoggingMode.FAILED)
    kind_fields: tuple[str, ...] = ()  # the kind's own, shown after dataset and endpoint

    def __init__(self, *args: Any, task: Task, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        cast(
            forms.ModelChoiceField, self.fields["dataset"]
        ).queryset = Dataset.objects.ready().filter(task=task)
        self.order_fields(["dataset", "endpoint", *self.kind_fields, "label", "epochs"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self.check_budget(data.get("endpoint"))
        return data

    def unsaved_run(self) -> Run:
        """The run these choices make, unsaved, with its kind's setup attached (for the cost
        estimate: the kind's `prepare` reads an unsaved run's setup from it)."""
        raise NotImplementedError

    def _unsaved(self, kind: str) -> Run:
        data = self.cleaned_data
        use_cache = self.cache_choice()
        return Run(
            task=self.task,
            kind=kind,
            dataset=data["dataset"],
            endpoint=data["endpoint"],
            epochs=data.get("epochs") or 1,
            multi_turn=True,
            use_cache=Run.default_use_cache(Run.Kind.GENERATION, data["endpoint"])
            if use_cache is None
            else use_cache,
        )

    def options(self) -> dict[str, Any]:
        """The keyword arguments both creators take."""
        data = self.cleaned_data
        return {
            "label": data["label"],
            "epochs": data["epochs"],
            "logging_mode": data["logging_mode"],
            "use_cache": self.cache_choice(),
            "budget_usd": data.get("budget_usd"),
        }


class ScriptRunForm(DialogueRunForm):
    """A memory-script run (GoodAI's LTM): each item's statements, filler up to the gap, then
    its question, each a turn; the expected answer is the item's reference."""

    statements_column = forms.CharField(
        max_length=200,
        help_text="The column holding the statements to tell the model (a list, or one text).",
    )
    question_column = forms.CharField(
        max_length=200, help_text="The column holding the question asked after the gap."
    )
    gap_tokens = forms.IntegerField(
        min_value=0,
        initial=0,
        label="Information gap (tokens)",
        help_text="Filler between the last statement and the question.",
    )
    gap_column = forms.CharField(
        required=False, max_length=200, help_text="Optional: a column giving the gap per item."
    )
    filler_column = forms.CharField(
        required=False,
        max_length=200,
        help_text="Optional: the item's own filler text; blank draws the bundled generic text.",
    )
    filler_seed = forms.IntegerField(initial=0, help_text="Which filler the draw picks.")
    system_message = PromptTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Said to the model before the script (blank: nothing).",
    )

    kind_fields = (
        "statements_column",
        "question_column",
        "gap_tokens",
        "gap_column",
        "filler_column",
        "filler_seed",
        "system_message",
    )

    def script(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in self.kind_fields}

    def unsaved_run(self) -> Run:
        run = self._unsaved(Run.Kind.SCRIPT)
        run.script_setup = ScriptSetup(**self.script())
        return run


class SimulationRunForm(DialogueRunForm):
    """A simulated user (another endpoint, told who it is and what it wants) converses with
    the model for up to `max_turns` answers or until it says its done marker."""

    simulator = forms.ModelChoiceField(
        queryset=Endpoint.objects.all(), label="Simulated user's endpoint"
    )
    instructions = PromptTextField(
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text="The simulated user's persona and goal, a template over the item's fields "
        "(e.g. {{ goal }}).",
    )
    system_message = PromptTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Model's system message",
        help_text="Optional, a template over the item's fields.",
    )
    opening_column = forms.CharField(
        required=False,
        max_length=200,
        help_text="Optional: a column with the conversation's first line; blank lets the "
        "simulated user open.",
    )
    max_turns = forms.IntegerField(
        min_value=1, max_value=SimulatorSetup.MAX_TURNS, initial=4, help_text="Model answers."
    )
    done_marker = forms.CharField(
        max_length=100,
        initial="[DONE]",
        help_text="The simulated user ends the conversation by saying this.",
    )

    kind_fields = (
        "simulator",
        "instructions",
        "system_message",
        "opening_column",
        "max_turns",
        "done_marker",
    )

    def simulation(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in self.kind_fields if name != "simulator"}

    def unsaved_run(self) -> Run:
        run = self._unsaved(Run.Kind.SIMULATION)
        run.simulator_setup = SimulatorSetup(
            simulator=self.cleaned_data["simulator"], **self.simulation()
        )
        return run
