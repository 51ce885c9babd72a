"""Corpus-level metrics beside the per-item means (#29.12, first point): corpus BLEU and
macro-F1 over labels, each with a bootstrap interval over items, pinned to sacrebleu's
corpus_bleu and sklearn's f1_score(average="macro"), the interval to a seeded resampling
written here with those same references."""

import csv
import io
import json
import re
from collections.abc import Callable

import numpy as np
import pytest
import sacrebleu
from django.urls import reverse
from sklearn.metrics import f1_score

from apps.judges.metrics import corpus_bootstrap, corpus_table, evaluate
from apps.judges.models import Judge
from apps.leaderboards import boards
from apps.leaderboards.stats import RESAMPLES, SEED
from tests import factories as f

HYPOTHESES = [
    "The cat sat on the mat.",
    "A dog barks loudly at night.",
    "It is raining in London today.",
    "Hello world, said the program.",
    "I like green apples and pears.",
    "The meeting was moved to Friday.",
    "She reads a book every week.",
    "Prices rose by 3.5 percent in May.",
]
REFERENCES = [
    ["The cat is sitting on the mat."],
    ["The dog barks loudly at night.", "A dog is barking loudly tonight."],
    ["It rains in London today."],
    ['"Hello world", the program said.'],
    ["I like apples and pears."],
    ["The meeting has been moved to Friday.", "They moved the meeting to Friday."],
    ["Every week she reads a book."],
    ["Prices rose 3.5 percent in May."],
]
GOLD = ["entailment", "neutral", "contradiction", "neutral", "entailment", "neutral",
        "contradiction", "entailment", "neutral", "entailment"]  # fmt: skip
PREDICTED = ["Entailment", "neutral", "neutral", "maybe", "entailment.", "contradiction",
             "contradiction", "entailment", "neutral", "neutral"]  # fmt: skip


def reference_streams(references: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's layout: one stream per reference position, None where an item has fewer."""
    most = max(len(refs) for refs in references)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(most)]


def test_corpus_bleu_is_sacrebleus_corpus_bleu_not_the_mean_of_sentence_bleu():
    table = corpus_table("bleu", HYPOTHESES, REFERENCES)
    value = table.value(np.ones(table.n))
    expected = sacrebleu.corpus_bleu(HYPOTHESES, reference_streams(REFERENCES)).score
    assert value == pytest.approx(expected, abs=1e-9)
    mean = np.mean([evaluate("bleu", h, r) for h, r in zip(HYPOTHESES, REFERENCES, strict=True)])
    assert abs(value - mean) > 1  # the board's old number was the mean


def test_corpus_bleu_keeps_the_judges_options():
    options = {"lowercase": True, "max_n": 2, "smooth": "floor", "tokenize": "intl"}
    table = corpus_table("bleu", HYPOTHESES, REFERENCES, options)
    # corpus_bleu has no max_n argument: its BLEU class does.
    expected = sacrebleu.BLEU(
        lowercase=True, max_ngram_order=2, smooth_method="floor", tokenize="intl"
    ).corpus_score(HYPOTHESES, reference_streams(REFERENCES))
    assert table.value(np.ones(table.n)) == pytest.approx(expected.score, abs=1e-9)


def test_macro_f1_is_sklearns_over_the_labels_seen():
    table = corpus_table("macro_f1", PREDICTED, [[g] for g in GOLD])
    # The metric normalises as exact match does ("Entailment", "entailment." are the label).
    normalised = [p.lower().rstrip(".") for p in PREDICTED]
    expected = 100 * f1_score(GOLD, normalised, average="macro")
    assert table.value(np.ones(table.n)) == pytest.approx(expected, abs=1e-9)
    # By hand: entailment 6/7, neutral 1/2, contradiction 1/2, and "maybe", predicted once and
    # never right, is a label too (F1 0).
    assert expected == pytest.approx(100 * (6 / 7 + 0.5 + 0.5 + 0) / 4)


def seeded_reference(
    n: int, resamples: int, seed: int, metric: Callable[[np.ndarray], float]
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([metric(rng.integers(0, n, size=n)) for _ in range(resamples)])


def test_the_bootstrap_recomputes_corpus_bleu_on_resampled_items():
    table = corpus_table("bleu", HYPOTHESES, REFERENCES)

    def bleu(idx: np.ndarray) -> float:
        refs = [REFERENCES[i] for i in idx]
        return sacrebleu.corpus_bleu([HYPOTHESES[i] for i in idx], reference_streams(refs)).score

    ours = corpus_bootstrap(table, 40, seed=7)
    theirs = seeded_reference(table.n, 40, 7, bleu)
    assert ours == pytest.approx(theirs, abs=1e-9)
    assert np.percentile(ours, [2.5, 97.5]) == pytest.approx(np.percentile(theirs, [2.5, 97.5]))


def test_the_bootstrap_recomputes_macro_f1_on_resampled_items():
    table = corpus_table("macro_f1", PREDICTED, [[g] for g in GOLD])
    normalised = [p.lower().rstrip(".") for p in PREDICTED]

    def macro_f1(idx: np.ndarray) -> float:
        return 100 * f1_score([GOLD[i] for i in idx], [normalised[i] for i in idx], average="macro")

    ours = corpus_bootstrap(table, 60, seed=3)
    assert ours == pytest.approx(seeded_reference(table.n, 60, 3, macro_f1), abs=1e-9)


# ---- on the board -----------------------------------------------------------------------------
@pytest.fixture
def bleu_board(db):
    task = f.make_task("translate")
    rows = [
        {"key": f"k{i}", "fields": {"source": f"s{i}"}, "reference": refs[0]}
        for i, refs in enumerate(REFERENCES)
    ]
    dataset = f.make_dataset(task, rows, name="wmt")
    judge = f.make_judge(
        task,
        name="bleu",
        kind=Judge.Kind.METRIC,
        metric="bleu",
        subjects=[{"name": "bleu", "min": 0, "max": 100}],
    )
    texts = {f"k{i}": text for i, text in enumerate(HYPOTHESES)}
    texts["k7"] = None  # the model failed on the last item
    gen = f.make_generation_run(dataset, texts, label="model-a")
    run = f.make_judge_run(dataset, judge, source_run=gen)
    f.add_scores(
        run,
        {f"k{i}": {"bleu": evaluate("bleu", HYPOTHESES[i], [REFERENCES[i][0]])} for i in range(7)}
        | {"k7": {"bleu": None}},
    )
    return {"task": task, "judge": judge, "run": run}


def test_the_board_shows_corpus_bleu_beside_the_mean(bleu_board, viewer_client):
    single = [[refs[0]] for refs in REFERENCES]
    strict = sacrebleu.corpus_bleu([*HYPOTHESES[:7], ""], reference_streams(single)).score
    answered = sacrebleu.corpus_bleu(HYPOTHESES[:7], reference_streams(single[:7])).score
    board = boards.build(bleu_board["task"], boards.Params())
    cell = board.corpus[bleu_board["run"].pk]
    assert (cell.label, cell.n, cell.left_out) == ("Corpus BLEU", 8, 0)
    assert cell.value == pytest.approx(strict, abs=1e-9)
    assert cell.ci is not None and cell.ci.low < cell.value < cell.ci.high
    board = boards.build(bleu_board["task"], boards.Params(scoring="answered"))
    cell = board.corpus[bleu_board["run"].pk]
    assert (cell.value, cell.n, cell.left_out) == (pytest.approx(answered, abs=1e-9), 7, 1)
    assert RESAMPLES == 1000 and SEED  # the page says 1000 seeded resamples

    page = viewer_client.get(reverse("leaderboards:task", args=["translate"])).content.decode()
    corpus = page[page.index('id="corpus"') :]
    shown = re.search(r'data-stat="corpus">([^<]*)<', corpus)
    assert shown is not None and float(shown.group(1)) == pytest.approx(strict, abs=0.01)
    assert "corpus_bleu" in corpus and "percentile bootstrap over items" in corpus


def test_boards_of_other_judges_have_no_corpus_table(board_data, viewer_client):
    page = viewer_client.get(reverse("leaderboards:task", args=["demo"])).content.decode()
    assert 'id="corpus"' not in page


def test_the_board_csv_and_jsonl_carry_the_corpus_value(bleu_board, viewer_client):
    single = [[refs[0]] for refs in REFERENCES]
    strict = sacrebleu.corpus_bleu([*HYPOTHESES[:7], ""], reference_streams(single)).score
    url = reverse("leaderboards:task-export", args=["translate"])
    text = viewer_client.get(url, {"format": "csv"}).getvalue().decode("utf-8-sig")
    header, row = list(csv.reader(io.StringIO(text)))[:2]
    found = dict(zip(header, row, strict=True))
    assert float(found["corpus_bleu"]) == pytest.approx(strict, abs=0.005)  # 2 digits
    assert float(found["corpus_bleu.ci_low"]) < strict < float(found["corpus_bleu.ci_high"])
    assert found["corpus_bleu.n"] == "8"
    lines = viewer_client.get(url, {"format": "jsonl"}).getvalue().decode().splitlines()
    record = next(json.loads(line) for line in lines if '"corpus"' in line)
    assert record["corpus"]["metric"] == "corpus_bleu"
    assert record["corpus"]["value"] == pytest.approx(strict, abs=1e-9)
