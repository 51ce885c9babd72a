"""The export_results and leaderboard commands."""

import csv
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse


def run_command(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_export_results_csv_to_a_file(board_data, tmp_path, viewer_client):
    target = tmp_path / "out.csv"
    run_command("export_results", str(board_data["run_a"].pk), "--format", "csv", "-o", str(target))
    rows = list(csv.DictReader(target.open(newline="", encoding="utf-8-sig")))
    assert [r["key"] for r in rows] == ["k0", "k1", "k2", "k3", "k4", "k5"]
    assert rows[3]["accuracy.final"] == ""  # failed: empty, like NaN
    assert rows[5]["clarity.final"] == ""  # not scored: empty
    assert rows[0]["accuracy.final"] == "5.0"
    response = viewer_client.get(
        reverse("leaderboards:run-export", args=[board_data["run_a"].pk]), {"format": "csv"}
    )
    assert target.read_bytes() == b"".join(response.streaming_content)
    assert not list(tmp_path.glob("*.partial"))


def test_export_results_jsonl_to_stdout(board_data, capsys):
    call_command("export_results", str(board_data["run_b"].pk), "--format", "jsonl")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["scores"]["accuracy"]["final"] for line in lines] == [3.0, 3.0, 2.0, 2.0, 4.0, 1.0]


def test_export_results_unknown_run(db):
    with pytest.raises(CommandError, match="no run #999"):
        run_command("export_results", "999")


def test_leaderboard_table_reports_failed_items(board_data):
    text = run_command("leaderboard", "demo", "--scoring", "answered")
    lines = text.splitlines()
    assert "judge quality v1" in lines[0] and "human-corrected" in lines[0]
    assert "answered only" in lines[0]
    assert lines[1].startswith("Overall = weighted mean of the subjects' means")
    assert lines[2].split()[:8] == [
        "#",
        "tied",
        "model",
        "overall",
        "(0–100)",
        "95%",
        "CI",
        "accuracy",
    ]
    model_a = next(line for line in lines if line.startswith("1 ")).split()
    assert model_a[2:4] == ["model-a", "72.50"] and model_a[6] == "3.80"
    assert re.fullmatch(r"\[\d+\.\d\d,", model_a[4]) and re.fullmatch(r"\d+\.\d\d\]", model_a[5])
    assert model_a[1] == "1"  # six items: model-b is not told apart from it
    assert (
        "Not in the means of model-a: accuracy: 1 failed, 0 not scored; clarity: 0 failed, 1 not scored"
        in text
    )


def test_leaderboard_csv_matches_the_web_export(board_data, viewer_client, capsys):
    call_command("leaderboard", "demo", "--judge", "quality", "--format", "csv")
    printed = capsys.readouterr().out
    web = viewer_client.get(
        reverse("leaderboards:task-export", args=["demo"]), {"format": "csv", "values": "human"}
    )
    assert printed == web.content.decode()
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(printed))}
    assert rows["model-a"]["accuracy.human.failed"] == "1"
    assert rows["model-a"]["scoring"] == "strict"


def test_leaderboard_judge_values_and_tag(board_data, reviewer_user):
    from tests import factories as f

    f.score(board_data["run_a"], "k0", "accuracy").override(1, reviewer_user, "wrong")
    human = run_command("leaderboard", "demo", "--tag", "easy")
    judge = run_command("leaderboard", "demo", "--tag", "easy", "--values", "judge")

    def row(text: str) -> str:
        return next(line for line in text.splitlines() if line[:1].isdigit() and "model-a" in line)

    assert f"{(1 + 4 + 2) / 3:.2f}" in row(human).split()
    assert f"{(5 + 4 + 2) / 3:.2f}" in row(judge).split()


def test_leaderboard_errors(board_data):
    with pytest.raises(CommandError, match="no task 'nope'"):
        run_command("leaderboard", "nope")
    with pytest.raises(CommandError, match="Judges with runs: quality"):
        run_command("leaderboard", "demo", "--judge", "other")
    with pytest.raises(CommandError, match="tag 'zzz'"):
        run_command("leaderboard", "demo", "--tag", "zzz")
