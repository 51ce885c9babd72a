"""Configuration as code (#30.3): `apply FILE [--dry-run]` and `export_config TASK`."""

import io
import textwrap
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.configs.taskfile import ConfigError, apply, export
from apps.datasets.models import Task
from apps.drafting.models import Generator
from apps.judges.models import Judge, TaskJudging
from apps.review.models import ReviewPolicy
from apps.runs.models import Endpoint, PromptTemplate
from tests.base import make_user
from tests.factories import make_generation_run, make_qa_dataset

pytestmark = pytest.mark.django_db

CONFIG = textwrap.dedent(
    """\
    # evalsite task configuration: manage.py apply FILE [--dry-run]; export_config TASK
    task:
      slug: qa
      name: Arithmetic
    endpoints:
    - name: local
      base_url: http://127.0.0.1:9/v1
      model: test-model
      temperature: 0.0
      api_key_env: LOCAL_KEY
    templates:
    - name: qa
      system_message: Answer briefly.
      user_message: |-
        Q: {{ question }}
        Answer with a number.
    - name: chat
      messages:
      - role: system
        content: Be brief.
      - role: conversation
    judges:
    - name: accuracy
      kind: rubric
      subjects:
      - accuracy 1 5
      - clarity 1 5
    - name: exact
      kind: metric
      subjects:
      - exact_match 0 100
      metric: exact_match
    generators:
    - name: facts
      content_prompt: Ten facts about a fictional world.
      questions_prompt: Questions about {{ content }}
      answers_prompt: Answers to {{ questions }} about {{ content }}
    default_judge:
      judge: accuracy
      endpoint: local
    review:
      reviews_per_item: 2
      thresholds:
        accuracy: 1.0
      adjudicator: ada
      sample_percent: 10
      sample_seed: 7
      doubt_spread: 1.5
    """
)


@pytest.fixture
def ada(db):
    return make_user("reviewer", "ada")


def run_command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_a_dry_run_prints_the_plan_and_saves_nothing(tmp_path: Path, ada) -> None:
    path = tmp_path / "qa.yaml"
    path.write_text(CONFIG)
    out = run_command("apply", str(path), "--dry-run")
    assert out.splitlines() == [
        "create       task qa",
        "create       endpoint local",
        "create       template qa v1",
        "create       template chat v1",
        "create       judge accuracy v1",
        "create       judge exact v1",
        "create       generator facts v1",
        "update       default judge accuracy v1",
        "update       review policy qa (reviews_per_item, thresholds, adjudicator, sample_percent, sample_seed, doubt_spread)",
        "qa: would change 9 of 9.",
    ]
    assert not Task.objects.exists() and not Endpoint.objects.exists()


def test_apply_creates_everything_then_a_second_apply_changes_nothing(tmp_path, ada) -> None:
    path = tmp_path / "qa.yaml"
    path.write_text(CONFIG)
    assert run_command("apply", str(path)).splitlines()[-1] == "qa: changed 9 of 9."
    task = Task.objects.get(slug="qa")
    endpoint = Endpoint.objects.get(name="local")
    assert (endpoint.model, endpoint.temperature, endpoint.api_key_env) == (
        "test-model",
        0.0,
        "LOCAL_KEY",
    )
    assert endpoint.api_key_secret == ""
    qa = PromptTemplate.objects.get(task=task, name="qa")
    assert qa.user_message == "Q: {{ question }}\nAnswer with a number."
    chat = PromptTemplate.objects.get(task=task, name="chat")
    assert chat.messages == [{"role": "system", "content": "Be brief."}, {"role": "conversation"}]
    accuracy = Judge.objects.get(task=task, name="accuracy")
    assert accuracy.subjects == [
        {"name": "accuracy", "min": 1, "max": 5},
        {"name": "clarity", "min": 1, "max": 5},
    ]
    exact = Judge.objects.get(task=task, name="exact")
    assert (exact.kind, exact.metric, exact.subjects[0]["name"]) == (
        "metric",
        "exact_match",
        "exact_match",
    )
    assert Generator.objects.get(task=task, name="facts").content_prompt.startswith("Ten facts")
    judging = TaskJudging.objects.get(task=task)
    assert (judging.default_judge, judging.default_judge_endpoint, judging.doubt_spread) == (
        accuracy,
        endpoint,
        1.5,
    )
    policy = ReviewPolicy.objects.get(task=task)
    assert (policy.reviews_per_item, policy.thresholds, policy.adjudicator) == (
        2,
        {"accuracy": 1.0},
        ada,
    )
    assert (policy.sample_percent, policy.sample_seed, policy.sample_label) == (
        10,
        7,
        "random 10 % of items (seed 7)",
    )
    again = run_command("apply", str(path)).splitlines()
    assert again[-1] == "qa: changed 0 of 9."
    assert all(line.startswith("unchanged") for line in again[:-1])
    assert PromptTemplate.objects.count() == 2 and Judge.objects.count() == 2


def test_export_writes_the_applied_file_back_byte_for_byte(ada) -> None:
    apply(CONFIG)
    assert export(Task.objects.get(slug="qa")) == CONFIG
    # …and applying the export again changes nothing.
    assert apply(export(Task.objects.get(slug="qa"))).changed == 0


def test_a_changed_template_becomes_a_new_version_and_the_used_one_stays(ada) -> None:
    apply(CONFIG)
    task = Task.objects.get(slug="qa")
    v1 = PromptTemplate.objects.get(task=task, name="qa")
    dataset = make_qa_dataset(task, 2)
    used = make_generation_run(dataset, {0: "0"})
    used.template = v1
    used.save(update_fields=["template"])
    changed = CONFIG.replace("Answer with a number.", "Answer with a number only.")
    plan = apply(changed)
    assert "new version  template qa v2 (user_message)" in plan.lines
    v1.refresh_from_db()
    assert v1.user_message == "Q: {{ question }}\nAnswer with a number."
    v2 = PromptTemplate.objects.get(task=task, name="qa", version=2)
    assert v2.user_message == "Q: {{ question }}\nAnswer with a number only."
    # The export is the newest version, so it is the changed file.
    assert export(task) == changed


def test_a_changed_judge_becomes_a_new_version_and_the_default_follows(ada) -> None:
    apply(CONFIG)
    plan = apply(CONFIG.replace("- clarity 1 5", "- clarity 1 10"))
    assert "new version  judge accuracy v2 (subjects)" in plan.lines
    task = Task.objects.get(slug="qa")
    assert TaskJudging.objects.get(task=task).default_judge.version == 2


def test_an_endpoint_is_edited_in_place_and_its_stored_key_kept(ada) -> None:
    apply(CONFIG)
    Endpoint.objects.filter(name="local").update(api_key_secret="sk-stored-9f3a")
    plan = apply(CONFIG.replace("temperature: 0.0", "temperature: 0.5"))
    assert "update       endpoint local (temperature)" in plan.lines
    endpoint = Endpoint.objects.get(name="local")
    assert (endpoint.temperature, endpoint.api_key_secret) == (0.5, "sk-stored-9f3a")
    assert "sk-stored" not in export(Task.objects.get(slug="qa"))


def test_a_key_in_the_file_is_refused_and_nothing_is_written(tmp_path) -> None:
    bad = CONFIG.replace("  api_key_env: LOCAL_KEY\n", "  api_key: sk-live-123\n")
    path = tmp_path / "qa.yaml"
    path.write_text(bad)
    with pytest.raises(CommandError) as raised:
        run_command("apply", str(path))
    message = str(raised.value)
    assert "endpoints[0] (local): api_key: an API key never goes in the file" in message
    assert "sk-live-123" not in message
    assert not Task.objects.exists() and not Endpoint.objects.exists()


def test_every_problem_is_named_and_nothing_is_half_written(ada) -> None:
    bad = (
        CONFIG.replace("kind: metric", "kind: metric\n  colour: blue")
        .replace("  - accuracy 1 5\n  - clarity 1 5\n", "  - accuracy\n")
        .replace("Questions about {{ content }}", "Questions about {{ content|no_such_filter }}")
    )
    with pytest.raises(ConfigError) as raised:
        apply(bad)
    problems = raised.value.problems
    assert any(
        p.startswith("judges[0] (accuracy): Subject 'accuracy' needs a range") for p in problems
    )
    assert any(p.startswith("judges[1] (exact): colour: unknown field") for p in problems)
    assert any(p.startswith("generators[0] (facts): ") for p in problems)
    assert "default_judge: judge: qa has no judge 'accuracy'." in problems
    assert not Task.objects.exists() and not PromptTemplate.objects.exists()


def test_bad_yaml_is_named_by_its_line() -> None:
    with pytest.raises(ConfigError) as raised:
        apply("task:\n  slug: qa\n  name: [unclosed\n")
    assert raised.value.problems[0].startswith("line 4: not valid YAML")


def test_a_random_sample_without_a_seed_is_drawn_once_and_kept(ada) -> None:
    unseeded = CONFIG.replace("  sample_seed: 7\n", "")
    apply(unseeded)
    policy = ReviewPolicy.objects.get(task__slug="qa")
    seed, drawn_at = policy.sample_seed, policy.sample_set_at
    assert policy.sample_percent == 10 and drawn_at is not None
    assert apply(unseeded).changed == 0
    policy.refresh_from_db()
    assert (policy.sample_seed, policy.sample_set_at) == (seed, drawn_at)
    # The export names the seed drawn, so the file says which sample it is.
    assert f"  sample_seed: {seed}\n" in export(Task.objects.get(slug="qa"))


def test_the_task_file_carries_the_samples_design(ada) -> None:
    """#31.1 / #31.2: an active sample is a different estimator; the file says which it is."""
    active = CONFIG.replace("  sample_seed: 7\n", "  sample_seed: 7\n  sample_design: active\n")
    apply(active)
    policy = ReviewPolicy.objects.get(task__slug="qa")
    assert (policy.sample_design, policy.is_active) == ("active", True)
    exported = export(Task.objects.get(slug="qa"))
    assert "  sample_design: active\n" in exported
    assert apply(exported).changed == 0
    assert apply(CONFIG).changed == 0  # a file naming no design keeps the policy's
    assert ReviewPolicy.objects.get(task__slug="qa").sample_design == "active"
    uniform = CONFIG.replace("  sample_seed: 7\n", "  sample_seed: 7\n  sample_design: uniform\n")
    assert apply(uniform).changed == 1
    assert ReviewPolicy.objects.get(task__slug="qa").sample_design == "uniform"
    assert "sample_design" not in export(Task.objects.get(slug="qa"))
    with pytest.raises(ConfigError) as raised:
        apply(CONFIG.replace("  sample_seed: 7\n", "  sample_seed: 7\n  sample_design: best\n"))
    assert any("sample_design" in p and "best" in p for p in raised.value.problems)
