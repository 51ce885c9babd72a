from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.board_stats import BoardStats


T = TypeVar("T", bound="BoardSubject")


@_attrs_define
class BoardSubject:
    """
    Attributes:
        overridden (int):
        judge (BoardStats | None | Unset):
        human (BoardStats | None | Unset):
    """

    overridden: int
    judge: BoardStats | None | Unset = UNSET
    human: BoardStats | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.board_stats import BoardStats

        overridden = self.overridden

        judge: dict[str, Any] | None | Unset
        if isinstance(self.judge, Unset):
            judge = UNSET
        elif isinstance(self.judge, BoardStats):
            judge = self.judge.to_dict()
        else:
            judge = self.judge

        human: dict[str, Any] | None | Unset
        if isinstance(self.human, Unset):
            human = UNSET
        elif isinstance(self.human, BoardStats):
            human = self.human.to_dict()
        else:
            human = self.human

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "overridden": overridden,
            }
        )
        if judge is not UNSET:
            field_dict["judge"] = judge
        if human is not UNSET:
            field_dict["human"] = human

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.board_stats import BoardStats

        d = dict(src_dict)
        overridden = d.pop("overridden")

        def _parse_judge(data: object) -> BoardStats | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                judge_type_0 = BoardStats.from_dict(data)

                return judge_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BoardStats | None | Unset, data)

        judge = _parse_judge(d.pop("judge", UNSET))

        def _parse_human(data: object) -> BoardStats | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                human_type_0 = BoardStats.from_dict(data)

                return human_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BoardStats | None | Unset, data)

        human = _parse_human(d.pop("human", UNSET))

        board_subject = cls(
            overridden=overridden,
            judge=judge,
            human=human,
        )

        board_subject.additional_properties = d
        return board_subject

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
