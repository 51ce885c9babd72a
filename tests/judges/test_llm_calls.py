"""Every row that records a model call's outcome shares one definition of its columns
(runs.models.LLMCall): the same names, types and defaults, from one place."""

from apps.judges.models import ArchivedRound, Comparison, JudgeRound
from apps.runs.models import AttemptLog, LLMCall, Response

ROWS = (Response, AttemptLog, JudgeRound, ArchivedRound, Comparison)


def test_the_rows_of_model_calls_take_their_shared_columns_from_one_abstract_model():
    assert LLMCall._meta.abstract
    shared = {f.name: f.deconstruct()[1:] for f in LLMCall._meta.fields}
    assert set(shared) == set(LLMCall.CALL_FIELDS)
    for model in ROWS:
        assert issubclass(model, LLMCall), model
        own = {f.name: f.deconstruct()[1:] for f in model._meta.fields if f.name in shared}
        assert own == {n: d for n, d in shared.items() if n in own}, model
    # Two take one column away: a response's reply is its text; an attempt is never rewritten
    # by a later launch, so it has none.
    missing = {m.__name__: set(shared) - {f.name for f in m._meta.fields} for m in ROWS}
    assert missing == {
        "Response": {"raw_reply"},
        "AttemptLog": {"launch"},
        "JudgeRound": set(),
        "ArchivedRound": set(),
        "Comparison": set(),
    }


def test_a_rewritten_round_or_comparison_copies_every_shared_column():
    for model in (JudgeRound, Comparison):
        assert set(LLMCall.CALL_FIELDS) <= set(model.RESULT_FIELDS), model
    assert set(JudgeRound.RESULT_FIELDS) <= set(ArchivedRound.COPIED)
