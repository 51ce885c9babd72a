from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.board_row_corrected_type_0 import BoardRowCorrectedType0
    from ..models.board_row_overall import BoardRowOverall
    from ..models.board_row_overall_ci import BoardRowOverallCi
    from ..models.board_row_subjects import BoardRowSubjects
    from ..models.corpus_out import CorpusOut
    from ..models.cost_out import CostOut


T = TypeVar("T", bound="BoardRow")


@_attrs_define
class BoardRow:
    """
    Attributes:
        rank (int):
        tied_rank (int | None):
        model (str):
        run_id (int):
        judged_run_id (int | None):
        judged_column (None | str):
        dataset (str):
        run_status (str):
        overall (BoardRowOverall):
        overall_ci (BoardRowOverallCi):
        subjects (BoardRowSubjects):
        epochs (int):
        model_epoch_reduction (str):
        flaky_items (int | None):
        corpus (CorpusOut | None):
        turns (list[float | None] | None):
        corrected (BoardRowCorrectedType0 | None | Unset):
        cost (CostOut | None | Unset):
    """

    rank: int
    tied_rank: int | None
    model: str
    run_id: int
    judged_run_id: int | None
    judged_column: None | str
    dataset: str
    run_status: str
    overall: BoardRowOverall
    overall_ci: BoardRowOverallCi
    subjects: BoardRowSubjects
    epochs: int
    model_epoch_reduction: str
    flaky_items: int | None
    corpus: CorpusOut | None
    turns: list[float | None] | None
    corrected: BoardRowCorrectedType0 | None | Unset = UNSET
    cost: CostOut | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.board_row_corrected_type_0 import BoardRowCorrectedType0
        from ..models.corpus_out import CorpusOut
        from ..models.cost_out import CostOut

        rank = self.rank

        tied_rank: int | None
        tied_rank = self.tied_rank

        model = self.model

        run_id = self.run_id

        judged_run_id: int | None
        judged_run_id = self.judged_run_id

        judged_column: None | str
        judged_column = self.judged_column

        dataset = self.dataset

        run_status = self.run_status

        overall = self.overall.to_dict()

        overall_ci = self.overall_ci.to_dict()

        subjects = self.subjects.to_dict()

        epochs = self.epochs

        model_epoch_reduction = self.model_epoch_reduction

        flaky_items: int | None
        flaky_items = self.flaky_items

        corpus: dict[str, Any] | None
        if isinstance(self.corpus, CorpusOut):
            corpus = self.corpus.to_dict()
        else:
            corpus = self.corpus

        turns: list[float | None] | None
        if isinstance(self.turns, list):
            turns = []
            for turns_type_0_item_data in self.turns:
                turns_type_0_item: float | None
                turns_type_0_item = turns_type_0_item_data
                turns.append(turns_type_0_item)

        else:
            turns = self.turns

        corrected: dict[str, Any] | None | Unset
        if isinstance(self.corrected, Unset):
            corrected = UNSET
        elif isinstance(self.corrected, BoardRowCorrectedType0):
            corrected = self.corrected.to_dict()
        else:
            corrected = self.corrected

        cost: dict[str, Any] | None | Unset
        if isinstance(self.cost, Unset):
            cost = UNSET
        elif isinstance(self.cost, CostOut):
            cost = self.cost.to_dict()
        else:
            cost = self.cost

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "rank": rank,
                "tied_rank": tied_rank,
                "model": model,
                "run_id": run_id,
                "judged_run_id": judged_run_id,
                "judged_column": judged_column,
                "dataset": dataset,
                "run_status": run_status,
                "overall": overall,
                "overall_ci": overall_ci,
                "subjects": subjects,
                "epochs": epochs,
                "model_epoch_reduction": model_epoch_reduction,
                "flaky_items": flaky_items,
                "corpus": corpus,
                "turns": turns,
            }
        )
        if corrected is not UNSET:
            field_dict["corrected"] = corrected
        if cost is not UNSET:
            field_dict["cost"] = cost

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.board_row_corrected_type_0 import BoardRowCorrectedType0
        from ..models.board_row_overall import BoardRowOverall
        from ..models.board_row_overall_ci import BoardRowOverallCi
        from ..models.board_row_subjects import BoardRowSubjects
        from ..models.corpus_out import CorpusOut
        from ..models.cost_out import CostOut

        d = dict(src_dict)
        rank = d.pop("rank")

        def _parse_tied_rank(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        tied_rank = _parse_tied_rank(d.pop("tied_rank"))

        model = d.pop("model")

        run_id = d.pop("run_id")

        def _parse_judged_run_id(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        judged_run_id = _parse_judged_run_id(d.pop("judged_run_id"))

        def _parse_judged_column(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        judged_column = _parse_judged_column(d.pop("judged_column"))

        dataset = d.pop("dataset")

        run_status = d.pop("run_status")

        overall = BoardRowOverall.from_dict(d.pop("overall"))

        overall_ci = BoardRowOverallCi.from_dict(d.pop("overall_ci"))

        subjects = BoardRowSubjects.from_dict(d.pop("subjects"))

        epochs = d.pop("epochs")

        model_epoch_reduction = d.pop("model_epoch_reduction")

        def _parse_flaky_items(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        flaky_items = _parse_flaky_items(d.pop("flaky_items"))

        def _parse_corpus(data: object) -> CorpusOut | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                corpus_type_0 = CorpusOut.from_dict(data)

                return corpus_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CorpusOut | None, data)

        corpus = _parse_corpus(d.pop("corpus"))

        def _parse_turns(data: object) -> list[float | None] | None:
            if data is None:
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                turns_type_0 = []
                _turns_type_0 = data
                for turns_type_0_item_data in _turns_type_0:

                    def _parse_turns_type_0_item(data: object) -> float | None:
                        if data is None:
                            return data
                        return cast(float | None, data)

                    turns_type_0_item = _parse_turns_type_0_item(turns_type_0_item_data)

                    turns_type_0.append(turns_type_0_item)

                return turns_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[float | None] | None, data)

        turns = _parse_turns(d.pop("turns"))

        def _parse_corrected(data: object) -> BoardRowCorrectedType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                corrected_type_0 = BoardRowCorrectedType0.from_dict(data)

                return corrected_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BoardRowCorrectedType0 | None | Unset, data)

        corrected = _parse_corrected(d.pop("corrected", UNSET))

        def _parse_cost(data: object) -> CostOut | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                cost_type_0 = CostOut.from_dict(data)

                return cost_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CostOut | None | Unset, data)

        cost = _parse_cost(d.pop("cost", UNSET))

        board_row = cls(
            rank=rank,
            tied_rank=tied_rank,
            model=model,
            run_id=run_id,
            judged_run_id=judged_run_id,
            judged_column=judged_column,
            dataset=dataset,
            run_status=run_status,
            overall=overall,
            overall_ci=overall_ci,
            subjects=subjects,
            epochs=epochs,
            model_epoch_reduction=model_epoch_reduction,
            flaky_items=flaky_items,
            corpus=corpus,
            turns=turns,
            corrected=corrected,
            cost=cost,
        )

        board_row.additional_properties = d
        return board_row

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
