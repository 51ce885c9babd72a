from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.judge_run_in_logging_mode import JudgeRunInLoggingMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="JudgeRunIn")


@_attrs_define
class JudgeRunIn:
    """
    Attributes:
        judge (int | str):
        responses (int | str):
        endpoint (int | None | str | Unset):
        label (str | Unset):  Default: ''.
        logging_mode (JudgeRunInLoggingMode | Unset):  Default: JudgeRunInLoggingMode.FAILED.
        chunk_size (int | Unset):  Default: 200.
        batch (bool | Unset):  Default: False.
        use_cache (str | Unset):  Default: ''.
        budget_usd (float | None | Unset):
    """

    judge: int | str
    responses: int | str
    endpoint: int | None | str | Unset = UNSET
    label: str | Unset = ""
    logging_mode: JudgeRunInLoggingMode | Unset = JudgeRunInLoggingMode.FAILED
    chunk_size: int | Unset = 200
    batch: bool | Unset = False
    use_cache: str | Unset = ""
    budget_usd: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        judge: int | str
        judge = self.judge

        responses: int | str
        responses = self.responses

        endpoint: int | None | str | Unset
        if isinstance(self.endpoint, Unset):
            endpoint = UNSET
        else:
            endpoint = self.endpoint

        label = self.label

        logging_mode: str | Unset = UNSET
        if not isinstance(self.logging_mode, Unset):
            logging_mode = self.logging_mode.value

        chunk_size = self.chunk_size

        batch = self.batch

        use_cache = self.use_cache

        budget_usd: float | None | Unset
        if isinstance(self.budget_usd, Unset):
            budget_usd = UNSET
        else:
            budget_usd = self.budget_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "judge": judge,
                "responses": responses,
            }
        )
        if endpoint is not UNSET:
            field_dict["endpoint"] = endpoint
        if label is not UNSET:
            field_dict["label"] = label
        if logging_mode is not UNSET:
            field_dict["logging_mode"] = logging_mode
        if chunk_size is not UNSET:
            field_dict["chunk_size"] = chunk_size
        if batch is not UNSET:
            field_dict["batch"] = batch
        if use_cache is not UNSET:
            field_dict["use_cache"] = use_cache
        if budget_usd is not UNSET:
            field_dict["budget_usd"] = budget_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_judge(data: object) -> int | str:
            return cast(int | str, data)

        judge = _parse_judge(d.pop("judge"))

        def _parse_responses(data: object) -> int | str:
            return cast(int | str, data)

        responses = _parse_responses(d.pop("responses"))

        def _parse_endpoint(data: object) -> int | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | str | Unset, data)

        endpoint = _parse_endpoint(d.pop("endpoint", UNSET))

        label = d.pop("label", UNSET)

        _logging_mode = d.pop("logging_mode", UNSET)
        logging_mode: JudgeRunInLoggingMode | Unset
        if isinstance(_logging_mode, Unset):
            logging_mode = UNSET
        else:
            logging_mode = JudgeRunInLoggingMode(_logging_mode)

        chunk_size = d.pop("chunk_size", UNSET)

        batch = d.pop("batch", UNSET)

        use_cache = d.pop("use_cache", UNSET)

        def _parse_budget_usd(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd", UNSET))

        judge_run_in = cls(
            judge=judge,
            responses=responses,
            endpoint=endpoint,
            label=label,
            logging_mode=logging_mode,
            chunk_size=chunk_size,
            batch=batch,
            use_cache=use_cache,
            budget_usd=budget_usd,
        )

        judge_run_in.additional_properties = d
        return judge_run_in

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
