import pytest

from tests import factories as f


@pytest.fixture
def board_data(db):
    """Two models judged on six items; one failed score, one missing score, tags."""
    task = f.make_task("demo")
    dataset = f.make_dataset(
        task,
        [
            {"key": "k0", "fields": {"question": "q0", "answer": "a0"}, "tags": ["easy"]},
            {"key": "k1", "fields": {"question": "q1", "answer": "a1"}, "tags": ["easy"]},
            {"key": "k2", "fields": {"question": "q2", "answer": "a2"}, "tags": ["hard"]},
            {"key": "k3", "fields": {"question": "q3", "answer": "a3"}, "tags": ["hard", "math"]},
            {"key": "k4", "fields": {"question": "q4", "answer": "a4"}, "tags": []},
            {"key": "k5", "fields": {"question": "q5", "answer": "a5"}, "tags": ["easy", "math"]},
        ],
        columns=["question", "answer"],
        name="set",
    )
    judge = f.make_judge(task, name="quality")
    gen_a = f.make_generation_run(
        dataset, {f"k{i}": f"answer A{i}" for i in range(6)}, label="model-a"
    )
    gen_b = f.make_generation_run(
        dataset, {f"k{i}": f"answer B{i}" for i in range(6)}, label="model-b"
    )
    run_a = f.make_judge_run(dataset, judge, source_run=gen_a)
    run_b = f.make_judge_run(dataset, judge, source_run=gen_b)
    f.add_scores(
        run_a,
        {
            "k0": {"accuracy": 5, "clarity": 4},
            "k1": {"accuracy": 4, "clarity": 4},
            "k2": {"accuracy": 3, "clarity": 4},
            "k3": {"accuracy": None, "clarity": 4},
            "k4": {"accuracy": 5, "clarity": 4},
            "k5": {"accuracy": 2},
        },
    )
    f.add_scores(
        run_b,
        {
            "k0": {"accuracy": 3, "clarity": 5},
            "k1": {"accuracy": 3, "clarity": 5},
            "k2": {"accuracy": 2, "clarity": 5},
            "k3": {"accuracy": 2, "clarity": 5},
            "k4": {"accuracy": 4, "clarity": 5},
            "k5": {"accuracy": 1, "clarity": 5},
        },
    )
    return {
        "task": task,
        "dataset": dataset,
        "judge": judge,
        "gen_a": gen_a,
        "gen_b": gen_b,
        "run_a": run_a,
        "run_b": run_b,
    }
