from django.urls import reverse


def test_pages_render(board_data, reviewer_client):
    for name in ("task", "compare", "agreement"):
        r = reviewer_client.get(
            reverse(f"leaderboards:{name}", args=["demo"]),
            {"a": board_data["run_a"].pk, "b": board_data["run_b"].pk},
        )
        assert r.status_code == 200, r.content
    r = reviewer_client.get(reverse("leaderboards:task-export", args=["demo"]), {"format": "csv"})
    print(r.content.decode())
    r = reviewer_client.get(
        reverse("leaderboards:run-export", args=[board_data["run_a"].pk]), {"format": "csv"}
    )
    print(b"".join(r.streaming_content).decode())
    r = reviewer_client.get(reverse("leaderboards:task", args=["demo"]))
    print(r.content.decode()[-9000:])
