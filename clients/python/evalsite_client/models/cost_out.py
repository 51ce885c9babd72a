from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.run_cost_out import RunCostOut


T = TypeVar("T", bound="CostOut")


@_attrs_define
class CostOut:
    """What a model on the board cost (#32.4): its generation run (null for a response column)
    and the judge run that scored it, their sum, per item answered, and the generation's
    latency over the requests that went to the model.

        Attributes:
            generation (None | RunCostOut):
            judging (RunCostOut):
            tokens (int):
            usd (float | None):
            batch_saved_usd (float | None):
            cache_saved_usd (float | None):
            items (int):
            usd_per_item (float | None):
            latency_p50_ms (float | None):
            latency_p95_ms (float | None):
            latency_n (int):
            pareto_front (bool):
    """

    generation: None | RunCostOut
    judging: RunCostOut
    tokens: int
    usd: float | None
    batch_saved_usd: float | None
    cache_saved_usd: float | None
    items: int
    usd_per_item: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_n: int
    pareto_front: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.run_cost_out import RunCostOut

        generation: dict[str, Any] | None
        if isinstance(self.generation, RunCostOut):
            generation = self.generation.to_dict()
        else:
            generation = self.generation

        judging = self.judging.to_dict()

        tokens = self.tokens

        usd: float | None
        usd = self.usd

        batch_saved_usd: float | None
        batch_saved_usd = self.batch_saved_usd

        cache_saved_usd: float | None
        cache_saved_usd = self.cache_saved_usd

        items = self.items

        usd_per_item: float | None
        usd_per_item = self.usd_per_item

        latency_p50_ms: float | None
        latency_p50_ms = self.latency_p50_ms

        latency_p95_ms: float | None
        latency_p95_ms = self.latency_p95_ms

        latency_n = self.latency_n

        pareto_front = self.pareto_front

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "generation": generation,
                "judging": judging,
                "tokens": tokens,
                "usd": usd,
                "batch_saved_usd": batch_saved_usd,
                "cache_saved_usd": cache_saved_usd,
                "items": items,
                "usd_per_item": usd_per_item,
                "latency_p50_ms": latency_p50_ms,
                "latency_p95_ms": latency_p95_ms,
                "latency_n": latency_n,
                "pareto_front": pareto_front,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.run_cost_out import RunCostOut

        d = dict(src_dict)

        def _parse_generation(data: object) -> None | RunCostOut:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                generation_type_0 = RunCostOut.from_dict(data)

                return generation_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunCostOut, data)

        generation = _parse_generation(d.pop("generation"))

        judging = RunCostOut.from_dict(d.pop("judging"))

        tokens = d.pop("tokens")

        def _parse_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        usd = _parse_usd(d.pop("usd"))

        def _parse_batch_saved_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        batch_saved_usd = _parse_batch_saved_usd(d.pop("batch_saved_usd"))

        def _parse_cache_saved_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        cache_saved_usd = _parse_cache_saved_usd(d.pop("cache_saved_usd"))

        items = d.pop("items")

        def _parse_usd_per_item(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        usd_per_item = _parse_usd_per_item(d.pop("usd_per_item"))

        def _parse_latency_p50_ms(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        latency_p50_ms = _parse_latency_p50_ms(d.pop("latency_p50_ms"))

        def _parse_latency_p95_ms(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        latency_p95_ms = _parse_latency_p95_ms(d.pop("latency_p95_ms"))

        latency_n = d.pop("latency_n")

        pareto_front = d.pop("pareto_front")

        cost_out = cls(
            generation=generation,
            judging=judging,
            tokens=tokens,
            usd=usd,
            batch_saved_usd=batch_saved_usd,
            cache_saved_usd=cache_saved_usd,
            items=items,
            usd_per_item=usd_per_item,
            latency_p50_ms=latency_p50_ms,
            latency_p95_ms=latency_p95_ms,
            latency_n=latency_n,
            pareto_front=pareto_front,
        )

        cost_out.additional_properties = d
        return cost_out

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
