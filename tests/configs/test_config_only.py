"""Done when (#30.3): a task defined in a config file alone: `apply` on a fresh install, a
generation and a judge run against the loopback server, and `export_config` writes back the
same file."""

import io
import textwrap

import pytest
from django.core.management import call_command

from apps.datasets.models import Task
from apps.judges.models import Score
from apps.runs.models import Run
from tests.base import work
from tests.factories import make_qa_dataset, rubric_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONFIG = textwrap.dedent(
    """\
    # evalsite task configuration: manage.py apply FILE [--dry-run]; export_config TASK
    task:
      slug: sums
      name: Sums
    endpoints:
    - name: loopback
      base_url: {base_url}
      model: test-model
      temperature: 0.0
      api_key_env: LOOPBACK_KEY
      max_retries: 1
    templates:
    - name: ask
      system_message: Answer briefly.
      user_message: 'Q: {{{{ question }}}}'
    judges:
    - name: rubric
      kind: rubric
      subjects:
      - accuracy 1 5
      - clarity 1 5
    default_judge:
      judge: rubric
      endpoint: loopback
    """
)


def test_a_task_from_its_file_alone_runs_and_exports_the_same_file(tmp_path, llm_server):
    text = CONFIG.format(base_url=llm_server.base_url)
    path = tmp_path / "sums.yaml"
    path.write_text(text)
    out = io.StringIO()
    call_command("apply", str(path), stdout=out)
    assert out.getvalue().splitlines()[-1] == "sums: changed 5 of 6."

    task = Task.objects.get(slug="sums")
    dataset = make_qa_dataset(task, 3)
    call_command(
        "start_run",
        *("generation", "--dataset", str(dataset.pk), "--endpoint", "loopback"),
        *("--template", "ask", "--label", "model-x"),
        stdout=io.StringIO(),
    )
    llm_server.configure(default_reply=rubric_reply(4, 5))
    work()  # the generation run, then the judge run the default judge starts by itself
    generation = Run.objects.get(kind=Run.Kind.GENERATION)
    assert generation.status == Run.Status.COMPLETED, generation.error
    judged = Run.objects.get(kind=Run.Kind.JUDGE)
    if judged.status != Run.Status.COMPLETED:
        work()
        judged.refresh_from_db()
    assert judged.status == Run.Status.COMPLETED, judged.error
    assert judged.judged_with.judge.name == "rubric"
    values = sorted(Score.objects.filter(run=judged).values_list("subject", "judge_value"))
    assert values == [("accuracy", 4.0)] * 3 + [("clarity", 5.0)] * 3

    exported = tmp_path / "exported.yaml"
    call_command("export_config", "sums", "-o", str(exported))
    assert exported.read_text() == text
    again = io.StringIO()
    call_command("apply", str(exported), stdout=again)
    assert again.getvalue().splitlines()[-1] == "sums: changed 0 of 6."
