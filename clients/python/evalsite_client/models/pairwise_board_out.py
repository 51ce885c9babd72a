from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pairwise_row import PairwiseRow


T = TypeVar("T", bound="PairwiseBoardOut")


@_attrs_define
class PairwiseBoardOut:
    """
    Attributes:
        task (str):
        judge (int | None):
        source (str):
        rows (list[PairwiseRow] | Unset):
    """

    task: str
    judge: int | None
    source: str
    rows: list[PairwiseRow] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        task = self.task

        judge: int | None
        judge = self.judge

        source = self.source

        rows: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.rows, Unset):
            rows = []
            for rows_item_data in self.rows:
                rows_item = rows_item_data.to_dict()
                rows.append(rows_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "task": task,
                "judge": judge,
                "source": source,
            }
        )
        if rows is not UNSET:
            field_dict["rows"] = rows

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pairwise_row import PairwiseRow

        d = dict(src_dict)
        task = d.pop("task")

        def _parse_judge(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        judge = _parse_judge(d.pop("judge"))

        source = d.pop("source")

        _rows = d.pop("rows", UNSET)
        rows: list[PairwiseRow] | Unset = UNSET
        if _rows is not UNSET:
            rows = []
            for rows_item_data in _rows:
                rows_item = PairwiseRow.from_dict(rows_item_data)

                rows.append(rows_item)

        pairwise_board_out = cls(
            task=task,
            judge=judge,
            source=source,
            rows=rows,
        )

        pairwise_board_out.additional_properties = d
        return pairwise_board_out

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
