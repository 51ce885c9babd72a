from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.failed_round import FailedRound


T = TypeVar("T", bound="FailedItem")


@_attrs_define
class FailedItem:
    """
    Attributes:
        item_id (int):
        key (str):
        position (int):
        error_kind (str):
        error (str):
        epoch (int | None | Unset):
        attempts (int | None | Unset):
        rounds (list[FailedRound] | None | Unset):
        model_a (None | str | Unset):
        model_b (None | str | Unset):
        run_a (int | None | Unset):
        run_b (int | None | Unset):
    """

    item_id: int
    key: str
    position: int
    error_kind: str
    error: str
    epoch: int | None | Unset = UNSET
    attempts: int | None | Unset = UNSET
    rounds: list[FailedRound] | None | Unset = UNSET
    model_a: None | str | Unset = UNSET
    model_b: None | str | Unset = UNSET
    run_a: int | None | Unset = UNSET
    run_b: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        item_id = self.item_id

        key = self.key

        position = self.position

        error_kind = self.error_kind

        error = self.error

        epoch: int | None | Unset
        if isinstance(self.epoch, Unset):
            epoch = UNSET
        else:
            epoch = self.epoch

        attempts: int | None | Unset
        if isinstance(self.attempts, Unset):
            attempts = UNSET
        else:
            attempts = self.attempts

        rounds: list[dict[str, Any]] | None | Unset
        if isinstance(self.rounds, Unset):
            rounds = UNSET
        elif isinstance(self.rounds, list):
            rounds = []
            for rounds_type_0_item_data in self.rounds:
                rounds_type_0_item = rounds_type_0_item_data.to_dict()
                rounds.append(rounds_type_0_item)

        else:
            rounds = self.rounds

        model_a: None | str | Unset
        if isinstance(self.model_a, Unset):
            model_a = UNSET
        else:
            model_a = self.model_a

        model_b: None | str | Unset
        if isinstance(self.model_b, Unset):
            model_b = UNSET
        else:
            model_b = self.model_b

        run_a: int | None | Unset
        if isinstance(self.run_a, Unset):
            run_a = UNSET
        else:
            run_a = self.run_a

        run_b: int | None | Unset
        if isinstance(self.run_b, Unset):
            run_b = UNSET
        else:
            run_b = self.run_b

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "item_id": item_id,
                "key": key,
                "position": position,
                "error_kind": error_kind,
                "error": error,
            }
        )
        if epoch is not UNSET:
            field_dict["epoch"] = epoch
        if attempts is not UNSET:
            field_dict["attempts"] = attempts
        if rounds is not UNSET:
            field_dict["rounds"] = rounds
        if model_a is not UNSET:
            field_dict["model_a"] = model_a
        if model_b is not UNSET:
            field_dict["model_b"] = model_b
        if run_a is not UNSET:
            field_dict["run_a"] = run_a
        if run_b is not UNSET:
            field_dict["run_b"] = run_b

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.failed_round import FailedRound

        d = dict(src_dict)
        item_id = d.pop("item_id")

        key = d.pop("key")

        position = d.pop("position")

        error_kind = d.pop("error_kind")

        error = d.pop("error")

        def _parse_epoch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        epoch = _parse_epoch(d.pop("epoch", UNSET))

        def _parse_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        attempts = _parse_attempts(d.pop("attempts", UNSET))

        def _parse_rounds(data: object) -> list[FailedRound] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                rounds_type_0 = []
                _rounds_type_0 = data
                for rounds_type_0_item_data in _rounds_type_0:
                    rounds_type_0_item = FailedRound.from_dict(rounds_type_0_item_data)

                    rounds_type_0.append(rounds_type_0_item)

                return rounds_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[FailedRound] | None | Unset, data)

        rounds = _parse_rounds(d.pop("rounds", UNSET))

        def _parse_model_a(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model_a = _parse_model_a(d.pop("model_a", UNSET))

        def _parse_model_b(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model_b = _parse_model_b(d.pop("model_b", UNSET))

        def _parse_run_a(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        run_a = _parse_run_a(d.pop("run_a", UNSET))

        def _parse_run_b(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        run_b = _parse_run_b(d.pop("run_b", UNSET))

        failed_item = cls(
            item_id=item_id,
            key=key,
            position=position,
            error_kind=error_kind,
            error=error,
            epoch=epoch,
            attempts=attempts,
            rounds=rounds,
            model_a=model_a,
            model_b=model_b,
            run_a=run_a,
            run_b=run_b,
        )

        failed_item.additional_properties = d
        return failed_item

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
