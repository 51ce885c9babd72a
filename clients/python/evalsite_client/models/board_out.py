from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.board_out_judge_corrected_type_0 import BoardOutJudgeCorrectedType0
    from ..models.board_out_scales import BoardOutScales
    from ..models.board_out_weights import BoardOutWeights
    from ..models.board_row import BoardRow
    from ..models.judge_version import JudgeVersion


T = TypeVar("T", bound="BoardOut")


@_attrs_define
class BoardOut:
    """
    Attributes:
        task (str):
        judge (None | str):
        judge_version (int | None):
        values (str):
        scoring (str):
        items (str):
        clustered_by (None | str):
        epochs (str):
        weights (BoardOutWeights):
        tag (None | str):
        sort (str):
        direction (str):
        overall_formula (str):
        scales (BoardOutScales):
        judges (list[JudgeVersion]):
        rows (list[BoardRow]):
        judge_corrected (BoardOutJudgeCorrectedType0 | None | Unset):
    """

    task: str
    judge: None | str
    judge_version: int | None
    values: str
    scoring: str
    items: str
    clustered_by: None | str
    epochs: str
    weights: BoardOutWeights
    tag: None | str
    sort: str
    direction: str
    overall_formula: str
    scales: BoardOutScales
    judges: list[JudgeVersion]
    rows: list[BoardRow]
    judge_corrected: BoardOutJudgeCorrectedType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.board_out_judge_corrected_type_0 import (
            BoardOutJudgeCorrectedType0,
        )

        task = self.task

        judge: None | str
        judge = self.judge

        judge_version: int | None
        judge_version = self.judge_version

        values = self.values

        scoring = self.scoring

        items = self.items

        clustered_by: None | str
        clustered_by = self.clustered_by

        epochs = self.epochs

        weights = self.weights.to_dict()

        tag: None | str
        tag = self.tag

        sort = self.sort

        direction = self.direction

        overall_formula = self.overall_formula

        scales = self.scales.to_dict()

        judges = []
        for judges_item_data in self.judges:
            judges_item = judges_item_data.to_dict()
            judges.append(judges_item)

        rows = []
        for rows_item_data in self.rows:
            rows_item = rows_item_data.to_dict()
            rows.append(rows_item)

        judge_corrected: dict[str, Any] | None | Unset
        if isinstance(self.judge_corrected, Unset):
            judge_corrected = UNSET
        elif isinstance(self.judge_corrected, BoardOutJudgeCorrectedType0):
            judge_corrected = self.judge_corrected.to_dict()
        else:
            judge_corrected = self.judge_corrected

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "task": task,
                "judge": judge,
                "judge_version": judge_version,
                "values": values,
                "scoring": scoring,
                "items": items,
                "clustered_by": clustered_by,
                "epochs": epochs,
                "weights": weights,
                "tag": tag,
                "sort": sort,
                "direction": direction,
                "overall_formula": overall_formula,
                "scales": scales,
                "judges": judges,
                "rows": rows,
            }
        )
        if judge_corrected is not UNSET:
            field_dict["judge_corrected"] = judge_corrected

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.board_out_judge_corrected_type_0 import (
            BoardOutJudgeCorrectedType0,
        )
        from ..models.board_out_scales import BoardOutScales
        from ..models.board_out_weights import BoardOutWeights
        from ..models.board_row import BoardRow
        from ..models.judge_version import JudgeVersion

        d = dict(src_dict)
        task = d.pop("task")

        def _parse_judge(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        judge = _parse_judge(d.pop("judge"))

        def _parse_judge_version(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        judge_version = _parse_judge_version(d.pop("judge_version"))

        values = d.pop("values")

        scoring = d.pop("scoring")

        items = d.pop("items")

        def _parse_clustered_by(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        clustered_by = _parse_clustered_by(d.pop("clustered_by"))

        epochs = d.pop("epochs")

        weights = BoardOutWeights.from_dict(d.pop("weights"))

        def _parse_tag(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        tag = _parse_tag(d.pop("tag"))

        sort = d.pop("sort")

        direction = d.pop("direction")

        overall_formula = d.pop("overall_formula")

        scales = BoardOutScales.from_dict(d.pop("scales"))

        judges = []
        _judges = d.pop("judges")
        for judges_item_data in _judges:
            judges_item = JudgeVersion.from_dict(judges_item_data)

            judges.append(judges_item)

        rows = []
        _rows = d.pop("rows")
        for rows_item_data in _rows:
            rows_item = BoardRow.from_dict(rows_item_data)

            rows.append(rows_item)

        def _parse_judge_corrected(
            data: object,
        ) -> BoardOutJudgeCorrectedType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                judge_corrected_type_0 = BoardOutJudgeCorrectedType0.from_dict(data)

                return judge_corrected_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BoardOutJudgeCorrectedType0 | None | Unset, data)

        judge_corrected = _parse_judge_corrected(d.pop("judge_corrected", UNSET))

        board_out = cls(
            task=task,
            judge=judge,
            judge_version=judge_version,
            values=values,
            scoring=scoring,
            items=items,
            clustered_by=clustered_by,
            epochs=epochs,
            weights=weights,
            tag=tag,
            sort=sort,
            direction=direction,
            overall_formula=overall_formula,
            scales=scales,
            judges=judges,
            rows=rows,
            judge_corrected=judge_corrected,
        )

        board_out.additional_properties = d
        return board_out

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
