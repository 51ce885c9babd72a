from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.simulation_run_in_logging_mode import SimulationRunInLoggingMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="SimulationRunIn")


@_attrs_define
class SimulationRunIn:
    """A simulated-user conversation run: what `start_run simulation` takes.

    Attributes:
        dataset (int):
        endpoint (int | str):
        simulator (int | str):
        instructions (str):
        system_message (str | Unset):  Default: ''.
        opening_column (str | Unset):  Default: ''.
        max_turns (int | Unset):  Default: 4.
        done_marker (str | Unset):  Default: '[DONE]'.
        label (str | Unset):  Default: ''.
        epochs (int | Unset):  Default: 1.
        logging_mode (SimulationRunInLoggingMode | Unset):  Default: SimulationRunInLoggingMode.FAILED.
        budget_usd (float | None | Unset):
    """

    dataset: int
    endpoint: int | str
    simulator: int | str
    instructions: str
    system_message: str | Unset = ""
    opening_column: str | Unset = ""
    max_turns: int | Unset = 4
    done_marker: str | Unset = "[DONE]"
    label: str | Unset = ""
    epochs: int | Unset = 1
    logging_mode: SimulationRunInLoggingMode | Unset = SimulationRunInLoggingMode.FAILED
    budget_usd: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset = self.dataset

        endpoint: int | str
        endpoint = self.endpoint

        simulator: int | str
        simulator = self.simulator

        instructions = self.instructions

        system_message = self.system_message

        opening_column = self.opening_column

        max_turns = self.max_turns

        done_marker = self.done_marker

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
                "simulator": simulator,
                "instructions": instructions,
            }
        )
        if system_message is not UNSET:
            field_dict["system_message"] = system_message
        if opening_column is not UNSET:
            field_dict["opening_column"] = opening_column
        if max_turns is not UNSET:
            field_dict["max_turns"] = max_turns
        if done_marker is not UNSET:
            field_dict["done_marker"] = done_marker
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

        def _parse_simulator(data: object) -> int | str:
            return cast(int | str, data)

        simulator = _parse_simulator(d.pop("simulator"))

        instructions = d.pop("instructions")

        system_message = d.pop("system_message", UNSET)

        opening_column = d.pop("opening_column", UNSET)

        max_turns = d.pop("max_turns", UNSET)

        done_marker = d.pop("done_marker", UNSET)

        label = d.pop("label", UNSET)

        epochs = d.pop("epochs", UNSET)

        _logging_mode = d.pop("logging_mode", UNSET)
        logging_mode: SimulationRunInLoggingMode | Unset
        if isinstance(_logging_mode, Unset):
            logging_mode = UNSET
        else:
            logging_mode = SimulationRunInLoggingMode(_logging_mode)

        def _parse_budget_usd(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd", UNSET))

        simulation_run_in = cls(
            dataset=dataset,
            endpoint=endpoint,
            simulator=simulator,
            instructions=instructions,
            system_message=system_message,
            opening_column=opening_column,
            max_turns=max_turns,
            done_marker=done_marker,
            label=label,
            epochs=epochs,
            logging_mode=logging_mode,
            budget_usd=budget_usd,
        )

        simulation_run_in.additional_properties = d
        return simulation_run_in

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
