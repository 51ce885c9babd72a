from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.script_run_in_logging_mode import ScriptRunInLoggingMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="ScriptRunIn")


@_attrs_define
class ScriptRunIn:
    """A memory-script run (GoodAI's LTM): what `start_run script` takes.

    Attributes:
        dataset (int):
        endpoint (int | str):
        statements_column (str):
        question_column (str):
        gap_tokens (int | Unset):  Default: 0.
        gap_column (str | Unset):  Default: ''.
        filler_column (str | Unset):  Default: ''.
        filler_seed (int | Unset):  Default: 0.
        system_message (str | Unset):  Default: ''.
        label (str | Unset):  Default: ''.
        epochs (int | Unset):  Default: 1.
        logging_mode (ScriptRunInLoggingMode | Unset):  Default: ScriptRunInLoggingMode.FAILED.
        budget_usd (float | None | Unset):
    """

    dataset: int
    endpoint: int | str
    statements_column: str
    question_column: str
    gap_tokens: int | Unset = 0
    gap_column: str | Unset = ""
    filler_column: str | Unset = ""
    filler_seed: int | Unset = 0
    system_message: str | Unset = ""
    label: str | Unset = ""
    epochs: int | Unset = 1
    logging_mode: ScriptRunInLoggingMode | Unset = ScriptRunInLoggingMode.FAILED
    budget_usd: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset = self.dataset

        endpoint: int | str
        endpoint = self.endpoint

        statements_column = self.statements_column

        question_column = self.question_column

        gap_tokens = self.gap_tokens

        gap_column = self.gap_column

        filler_column = self.filler_column

        filler_seed = self.filler_seed

        system_message = self.system_message

        label = self.label

        epochs = self.epochs

        logging_mode: str | Unset = UNSET
        if not isinstance(self.logging_mode, Unset):
            logging_mode = self.logging_mode.value

        budget_usd: float | None | Unset
        if isinstance(self.budget_usd, Unset):
            budget_usd = UNSET
        else:
            budget_usd = self.budget_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset": dataset,
                "endpoint": endpoint,
                "statements_column": statements_column,
                "question_column": question_column,
            }
        )
        if gap_tokens is not UNSET:
            field_dict["gap_tokens"] = gap_tokens
        if gap_column is not UNSET:
            field_dict["gap_column"] = gap_column
        if filler_column is not UNSET:
            field_dict["filler_column"] = filler_column
        if filler_seed is not UNSET:
            field_dict["filler_seed"] = filler_seed
        if system_message is not UNSET:
            field_dict["system_message"] = system_message
        if label is not UNSET:
            field_dict["label"] = label
        if epochs is not UNSET:
            field_dict["epochs"] = epochs
        if logging_mode is not UNSET:
            field_dict["logging_mode"] = logging_mode
        if budget_usd is not UNSET:
            field_dict["budget_usd"] = budget_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        dataset = d.pop("dataset")

        def _parse_endpoint(data: object) -> int | str:
            return cast(int | str, data)

        endpoint = _parse_endpoint(d.pop("endpoint"))

        statements_column = d.pop("statements_column")

        question_column = d.pop("question_column")

        gap_tokens = d.pop("gap_tokens", UNSET)

        gap_column = d.pop("gap_column", UNSET)

        filler_column = d.pop("filler_column", UNSET)

        filler_seed = d.pop("filler_seed", UNSET)

        system_message = d.pop("system_message", UNSET)

        label = d.pop("label", UNSET)

        epochs = d.pop("epochs", UNSET)

        _logging_mode = d.pop("logging_mode", UNSET)
        logging_mode: ScriptRunInLoggingMode | Unset
        if isinstance(_logging_mode, Unset):
            logging_mode = UNSET
        else:
            logging_mode = ScriptRunInLoggingMode(_logging_mode)

        def _parse_budget_usd(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd", UNSET))

        script_run_in = cls(
            dataset=dataset,
            endpoint=endpoint,
            statements_column=statements_column,
            question_column=question_column,
            gap_tokens=gap_tokens,
            gap_column=gap_column,
            filler_column=filler_column,
            filler_seed=filler_seed,
            system_message=system_message,
            label=label,
            epochs=epochs,
            logging_mode=logging_mode,
            budget_usd=budget_usd,
        )

        script_run_in.additional_properties = d
        return script_run_in

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
