"""Plug-ins the registry must leave out, each with its reason (tests/judges/test_plugins.py)."""


def exact_match(prediction: str, references: list[str], item: dict) -> float:
    return 0.0


EVALSITE_METRICS = {"exact_match": exact_match, "Bad Name!": exact_match, "not_code": 42}
EVALSITE_CONVERTERS = ["not", "a", "dict"]
