"""Python plug-ins (apps/judges/plugins.py, #30.5): the worked example package installed by pip
and scoring a dataset; plug-ins from a module the setting lists; a plug-in that raises fails
only its items, with its traceback in the attempt log for admins; what a plug-in returns is
checked; a judge version refuses to run once its plug-in's code changed. Runs go through the
engine in this process (run_chunk), as the plug-ins are loaded here."""

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges import plugins
from apps.judges.launching import JudgeRunError, create_judge_run
from apps.judges.models import Judge, Score
from apps.judges.parsing import JudgeReplyError
from apps.judges.scoring import JudgeSpec
from apps.leaderboards import boards
from apps.runs.engine.chunk import run_chunk
from apps.runs.models import AttemptLog, ErrorKind, Run
from tests.base import ROOT
from tests.factories import make_dataset
from tests.judges.test_judge_pages import create_url, judge_form

EXAMPLE = ROOT / "examples" / "evalsite-plugin-example"
MODULE = "tests.judges.plugin_module"


@pytest.fixture
def listed(settings) -> Iterator[plugins.Registry]:
    """The plug-ins of tests/judges/plugin_module.py, listed by the setting."""
    settings.EVALSITE_PLUGINS = [MODULE]
    yield plugins.reload()
    plugins.registry.cache_clear()  # the next use loads with the settings restored


@pytest.fixture
def example_installed(tmp_path: Path) -> Iterator[plugins.Registry]:
    """The example package installed by pip into a directory on sys.path, as an admin's
    `pip install` puts it into site-packages: its entry points are read from the installed
    distribution's metadata."""
    target, source = tmp_path / "site", tmp_path / "example"
    # From a copy: building writes build/ and egg-info beside the sources.
    shutil.copytree(EXAMPLE, source)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"),
            *("--no-index", "--disable-pip-version-check", "--target", str(target), str(source)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sys.path.insert(0, str(target))
    try:
        yield plugins.reload()
    finally:
        sys.path.remove(str(target))
        sys.modules.pop("evalsite_plugin_example", None)
        plugins.reload()


def run_here(judge: Judge, dataset, column: str = "response") -> Run:
    """A judge run over the dataset's column, its one chunk worked in this process."""
    with transaction.atomic():
        run = create_judge_run(judge, dataset=dataset, source_column=column)
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()
    assert run.is_terminal, run.status
    return run


def scores(run: Run, subject: str) -> dict[str, Score]:
    return {s.item.key: s for s in Score.objects.filter(run=run, subject=subject)}


# ---- the worked example ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_example_package_installs_and_scores_a_dataset(
    task, example_installed, reviewer_client, admin_client
):
    found = {(p.kind, p.name): p for p in example_installed.plugins.values()}
    assert set(found) == {
        ("metric", "word_recall"),
        ("dataset_metric", "corpus_word_recall"),
        ("postprocessor", "strip_think"),
        ("converter", "answer_from_choices"),
    }
    assert found[("metric", "word_recall")].origin.endswith("of evalsite-plugin-example 1.0.0")
    # The judge form lists them with their docstrings.
    page = reviewer_client.get(create_url(task)).content.decode()
    assert "Word recall: the share of the reference&#x27;s words" in page
    assert '<option value="strip_think">Strip &lt;think&gt; blocks</option>' in page
    assert "The answer text of a multiple-choice item" in page

    response = reviewer_client.post(
        create_url(task),
        judge_form(
            name="recall",
            kind="metric",
            subjects_text="",
            metric="word_recall",
            postprocess="strip_think",
            converter="answer_from_choices",
            dataset_metric="corpus_word_recall",
        ),
    )
    judge = Judge.objects.get(task=task, name="recall")
    assert response.status_code == 302
    assert judge.subjects == [
        {"name": "word_recall", "min": 0, "max": 100, "higher_is_better": True, "unit": "%"}
    ]
    assert {kind: entry["hash"] for kind, entry in judge.plugin_code.items()} == {
        (kind): plugin.code_hash for (kind, _), plugin in found.items()
    }
    # The judge page names them with their code.
    detail = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert f"word_recall</code> (code {found[('metric', 'word_recall')].code_hash})" in detail

    rows = [
        ("<think>red? no</think> Green", "red|green|blue", 1),  # think dropped: 100
        ("the dark blue one", '["light blue", "dark blue"]', 1),  # 100
        ("<think>light blue</think>dark blue", "light blue|dark red", 0),  # blue of light blue: 50
        ("blue", "red|green|blue", 7),  # no choice 7: the converter raises, the item fails
    ]
    dataset = make_dataset(
        task,
        [
            {
                "key": f"q{i}",
                "fields": {"question": "Which?", "choices": choices, "label": label, "response": r},
            }
            for i, (r, choices, label) in enumerate(rows)
        ],
        mapping={"input_columns": ["question"], "response_columns": ["response"]},
    )
    run = run_here(judge, dataset)
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    got = scores(run, "word_recall")
    assert [got[f"q{i}"].judge_value for i in range(3)] == [100, 100, 50]
    failed = got["q3"]
    assert failed.status == Score.Status.FAILED and failed.error_kind == ErrorKind.INTERNAL
    assert failed.error == (
        "The field converter plug-in 'answer_from_choices' raised ValueError: label 7 is not an "
        "index of the 3 choices"
    )
    log = AttemptLog.objects.get(run=run, item__key="q3")
    assert "in answer_from_choices" in log.traceback and log.traceback.endswith(
        "ValueError: label 7 is not an index of the 3 choices\n"
    )
    # The dataset metric on the board, beside the mean: words found over words wanted across
    # the run, green 1/1, dark blue 2/2, light blue 1/2 → 4/5; q3 (no reference) left out.
    cell = boards.build(task, boards.Params()).corpus[run.pk]
    assert (cell.name, cell.label, cell.n, cell.left_out) == (
        "corpus_word_recall",
        "Corpus word recall",
        3,
        1,
    )
    # The mean is strict: the failed item counts at the worst of the range, 0.
    assert cell.value == pytest.approx(80) and cell.item_mean == pytest.approx(250 / 4)
    assert cell.ci is not None and cell.ci.low <= 80 <= cell.ci.high
    board = admin_client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    corpus = board[board.index('id="corpus"') :]
    assert 'data-stat="corpus">80.00<' in corpus
    assert "A dataset metric plug-in (Python, installed by an admin): Corpus word recall" in corpus
    export = reverse("leaderboards:task-export", args=[task.slug])
    csv = admin_client.get(export, {"format": "csv"}).getvalue().decode("utf-8-sig").splitlines()
    header, row = csv[0].split(","), csv[1].split(",")
    assert row[header.index("corpus_word_recall")] == "80.0"


# ---- a plug-in that raises ------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_plugin_that_raises_fails_only_its_items(
    task, listed, reviewer_client, admin_client, client, reviewer_user
):
    assert listed.get("metric", "fragile").origin == f"module {MODULE}"
    judge = Judge.objects.create(
        task=task,
        name="fragile",
        kind=Judge.Kind.METRIC,
        metric="fragile",
        subjects=[{"name": "fragile", "min": 0, "max": 100}],
        plugin_code=plugins.code_record({"metric": "fragile"}),
    )
    divisors = [1, 0, 2, 0, 5]
    dataset = make_dataset(
        task,
        [
            {"key": f"q{i}", "fields": {"divisor": d, "response": "x" * 10}}
            for i, d in enumerate(divisors)
        ],
        mapping={"response_columns": ["response"]},
    )
    run = run_here(judge, dataset)
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES, run.error
    got = scores(run, "fragile")
    assert {key: s.judge_value for key, s in got.items()} == {
        "q0": 10,
        "q1": None,
        "q2": 5,
        "q3": None,
        "q4": 2,
    }
    for key in ("q1", "q3"):
        assert got[key].error == (
            "The metric plug-in 'fragile' raised ZeroDivisionError: division by zero"
        )
    logs = AttemptLog.objects.filter(run=run, ok=False)
    assert sorted(log.item.key for log in logs) == ["q1", "q3"]
    assert all("ZeroDivisionError: division by zero" in log.traceback for log in logs)
    # The traceback is for admins only.
    url = reverse("judges:failed", args=[run.pk])
    assert "ZeroDivisionError: division by zero\n" in admin_client.get(url).content.decode()
    client.force_login(reviewer_user)
    page = client.get(url).content.decode()
    assert "division by zero" in page and "Traceback (most recent call last)" not in page


# ---- what a plug-in gives back --------------------------------------------------------------
def test_what_a_plugin_metric_returns_is_checked(listed):
    two = [{"name": "chars", "min": 0, "max": 10}, {"name": "words", "min": 0, "max": 10}]
    spec = JudgeSpec(kind="metric", metric="two_values", subjects=tuple(two))
    result = plugins.score_item(spec, "two words", [], {})
    assert result.values == {"chars": 9, "words": 2} and result.reason == "9 characters"
    with pytest.raises(JudgeReplyError) as out_of_range:
        plugins.score_item(spec, "many more characters", [], {})
    assert out_of_range.value.kind == ErrorKind.OUT_OF_RANGE
    assert "gave 20 for chars, outside its range 0–10" in out_of_range.value.message
    missing = replace(spec, subjects=(*two, {"name": "lines", "min": 0, "max": 9}))
    with pytest.raises(JudgeReplyError, match=r"gave no 'lines' \(it gave 'chars', 'words'\)"):
        plugins.score_item(missing, "a", [], {})
    one = JudgeSpec(kind="metric", metric="fragile", postprocess="shout")
    assert plugins.score_item(one, "abcd", [], {"divisor": 2}).values == {"fragile": 2}
    with pytest.raises(JudgeReplyError, match="gave one number; this judge has 2 subjects"):
        plugins.score_item(replace(one, subjects=tuple(two)), "a", [], {"divisor": 1})
    with pytest.raises(plugins.PluginRaised, match="raised KeyError: 'divisor'"):
        plugins.score_item(one, "a", [], {})
    # A built-in metric with a plug-in post-processor: "abc" shouted is "ABC".
    builtin = JudgeSpec(
        kind="metric",
        metric="exact_match",
        postprocess="shout",
        metric_options={"ignore_case": False},
    )
    assert plugins.score_item(builtin, "abc", ["ABC"], {}).values == {"exact_match": 100}
    assert builtin.uses_plugins and not replace(builtin, postprocess="strip").uses_plugins


def test_the_registry_names_what_it_leaves_out(settings):
    found = plugins.load(["tests.judges.plugin_clashes", "no_such_plugins", "apps.judges.metrics"])
    assert found.plugins == {}
    problems = "\n".join(found.problems)
    assert (
        "metric plug-in 'exact_match' (module tests.judges.plugin_clashes): a built-in" in problems
    )
    assert "'Bad Name!'" in problems and "42 is not a function" in problems
    assert "EVALSITE_CONVERTERS must be a dict of name → function, not list" in problems
    assert "'no_such_plugins' (EVALSITE_PLUGINS) could not be imported: ModuleNotFound" in problems
    assert "'apps.judges.metrics' (EVALSITE_PLUGINS) is part of evalsite" in problems


@pytest.mark.django_db
def test_a_judge_version_runs_only_with_the_code_it_recorded(task, listed, reviewer_client):
    form = judge_form(name="len", kind="metric", subjects_text="", metric="fragile")
    assert reviewer_client.post(create_url(task), form).status_code == 302
    judge = Judge.objects.get(task=task, name="len")
    recorded = judge.plugin_code["metric"]["hash"]
    assert recorded == listed.get("metric", "fragile").code_hash
    dataset = make_dataset(task, [{"key": "a", "fields": {"divisor": 1, "response": "x"}}])
    # A new deploy changes the plug-in's code: the version refuses to run, and says what to do.
    changed = replace(listed.get("metric", "fragile"), code_hash="0" * 16)
    listed.plugins[("metric", "fragile")] = changed
    with pytest.raises(JudgeRunError, match=r"changed since this version was saved \(code "):
        create_judge_run(judge, dataset=dataset, source_column="response")
    edit = reverse("judges:edit", args=[judge.pk])
    assert reviewer_client.post(edit, form).status_code == 302
    newer = Judge.objects.get(task=task, name="len", version=2)
    assert newer.plugin_code["metric"]["hash"] == "0" * 16
    create_judge_run(newer, dataset=dataset, source_column="response")
