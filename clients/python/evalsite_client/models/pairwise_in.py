from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.pairwise_in_logging_mode import PairwiseInLoggingMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="PairwiseIn")


@_attrs_define
class PairwiseIn:
    """
    Attributes:
        judge (int | str):
        responses (list[int | str]):
        endpoint (int | str):
        baseline (int | str | Unset):  Default: ''.
        logging_mode (PairwiseInLoggingMode | Unset):  Default: PairwiseInLoggingMode.FAILED.
        batch (bool | Unset):  Default: False.
        use_cache (str | Unset):  Default: ''.
        budget_usd (float | None | Unset):
    """

    judge: int | str
    responses: list[int | str]
    endpoint: int | str
    baseline: int | str | Unset = ""
    logging_mode: PairwiseInLoggingMode | Unset = PairwiseInLoggingMode.FAILED
    batch: bool | Unset = False
    use_cache: str | Unset = ""
    budget_usd: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        judge: int | str
        judge = self.judge

        responses = []
        for responses_item_data in self.responses:
            responses_item: int | str
            responses_item = responses_item_data
            responses.append(responses_item)

        endpoint: int | str
        endpoint = self.endpoint

        baseline: int | str | Unset
        if isinstance(self.baseline, Unset):
            baseline = UNSET
        else:
            baseline = self.baseline

        logging_mode: str | Unset = UNSET
        if not isinstance(self.logging_mode, Unset):
            logging_mode = self.logging_mode.value

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
                "endpoint": endpoint,
            }
        )
        if baseline is not UNSET:
            field_dict["baseline"] = baseline
        if logging_mode is not UNSET:
            field_dict["logging_mode"] = logging_mode
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

        responses = []
        _responses = d.pop("responses")
        for responses_item_data in _responses:

            def _parse_responses_item(data: object) -> int | str:
                return cast(int | str, data)

            responses_item = _parse_responses_item(responses_item_data)

            responses.append(responses_item)

        def _parse_endpoint(data: object) -> int | str:
            return cast(int | str, data)

        endpoint = _parse_endpoint(d.pop("endpoint"))

        def _parse_baseline(data: object) -> int | str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(int | str | Unset, data)

        baseline = _parse_baseline(d.pop("baseline", UNSET))

        _logging_mode = d.pop("logging_mode", UNSET)
        logging_mode: PairwiseInLoggingMode | Unset
        if isinstance(_logging_mode, Unset):
            logging_mode = UNSET
        else:
            logging_mode = PairwiseInLoggingMode(_logging_mode)

        batch = d.pop("batch", UNSET)

        use_cache = d.pop("use_cache", UNSET)

        def _parse_budget_usd(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd", UNSET))

        pairwise_in = cls(
            judge=judge,
            responses=responses,
            endpoint=endpoint,
            baseline=baseline,
            logging_mode=logging_mode,
            batch=batch,
            use_cache=use_cache,
            budget_usd=budget_usd,
        )

        pairwise_in.additional_properties = d
        return pairwise_in

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
