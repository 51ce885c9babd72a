from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.generation_in_logging_mode import GenerationInLoggingMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="GenerationIn")


@_attrs_define
class GenerationIn:
    """
    Attributes:
        task (str):
        dataset (int):
        endpoint (int | str):
        template (int | str):
        label (str | Unset):  Default: ''.
        epochs (int | Unset):  Default: 1.
        logging_mode (GenerationInLoggingMode | Unset):  Default: GenerationInLoggingMode.FAILED.
        chunk_size (int | Unset):  Default: 200.
        batch (bool | Unset):  Default: False.
        use_cache (str | Unset):  Default: ''.
        budget_usd (float | None | Unset):
        multi_turn (bool | Unset):  Default: False.
    """

    task: str
    dataset: int
    endpoint: int | str
    template: int | str
    label: str | Unset = ""
    epochs: int | Unset = 1
    logging_mode: GenerationInLoggingMode | Unset = GenerationInLoggingMode.FAILED
    chunk_size: int | Unset = 200
    batch: bool | Unset = False
    use_cache: str | Unset = ""
    budget_usd: float | None | Unset = UNSET
    multi_turn: bool | Unset = False
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        task = self.task

        dataset = self.dataset

        endpoint: int | str
        endpoint = self.endpoint

        template: int | str
        template = self.template

        label = self.label

        epochs = self.epochs

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

        multi_turn = self.multi_turn

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "task": task,
                "dataset": dataset,
                "endpoint": endpoint,
                "template": template,
            }
        )
        if label is not UNSET:
            field_dict["label"] = label
        if epochs is not UNSET:
            field_dict["epochs"] = epochs
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
        if multi_turn is not UNSET:
            field_dict["multi_turn"] = multi_turn

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        task = d.pop("task")

        dataset = d.pop("dataset")

        def _parse_endpoint(data: object) -> int | str:
            return cast(int | str, data)

        endpoint = _parse_endpoint(d.pop("endpoint"))

        def _parse_template(data: object) -> int | str:
            return cast(int | str, data)

        template = _parse_template(d.pop("template"))

        label = d.pop("label", UNSET)

        epochs = d.pop("epochs", UNSET)

        _logging_mode = d.pop("logging_mode", UNSET)
        logging_mode: GenerationInLoggingMode | Unset
        if isinstance(_logging_mode, Unset):
            logging_mode = UNSET
        else:
            logging_mode = GenerationInLoggingMode(_logging_mode)

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

        multi_turn = d.pop("multi_turn", UNSET)

        generation_in = cls(
            task=task,
            dataset=dataset,
            endpoint=endpoint,
            template=template,
            label=label,
            epochs=epochs,
            logging_mode=logging_mode,
            chunk_size=chunk_size,
            batch=batch,
            use_cache=use_cache,
            budget_usd=budget_usd,
            multi_turn=multi_turn,
        )

        generation_in.additional_properties = d
        return generation_in

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
