from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.board_query_common import BoardQueryCommon
from ..models.board_query_correction import BoardQueryCorrection
from ..models.board_query_dir_type_0 import BoardQueryDirType0
from ..models.board_query_pairs import BoardQueryPairs
from ..models.board_query_scoring import BoardQueryScoring
from ..models.board_query_values import BoardQueryValues
from ..types import UNSET, Unset

T = TypeVar("T", bound="BoardQuery")


@_attrs_define
class BoardQuery:
    """The board page's query: the same names and values.

    Attributes:
        judge (int | None | str | Unset):
        judge_version (int | None | Unset):
        dataset (int | None | Unset):
        values (BoardQueryValues | Unset):  Default: BoardQueryValues.BOTH.
        scoring (BoardQueryScoring | Unset):  Default: BoardQueryScoring.STRICT.
        sort (str | Unset):  Default: 'overall'.
        dir_ (BoardQueryDirType0 | None | Unset):
        tag (None | str | Unset):
        common (BoardQueryCommon | Unset):  Default: BoardQueryCommon.VALUE_0.
        cluster (None | str | Unset):
        epochs (None | str | Unset):
        correction (BoardQueryCorrection | Unset):  Default: BoardQueryCorrection.HOLM.
        pairs (BoardQueryPairs | Unset):  Default: BoardQueryPairs.VALUE_0.
        target (float | None | Unset):
    """

    judge: int | None | str | Unset = UNSET
    judge_version: int | None | Unset = UNSET
    dataset: int | None | Unset = UNSET
    values: BoardQueryValues | Unset = BoardQueryValues.BOTH
    scoring: BoardQueryScoring | Unset = BoardQueryScoring.STRICT
    sort: str | Unset = "overall"
    dir_: BoardQueryDirType0 | None | Unset = UNSET
    tag: None | str | Unset = UNSET
    common: BoardQueryCommon | Unset = BoardQueryCommon.VALUE_0
    cluster: None | str | Unset = UNSET
    epochs: None | str | Unset = UNSET
    correction: BoardQueryCorrection | Unset = BoardQueryCorrection.HOLM
    pairs: BoardQueryPairs | Unset = BoardQueryPairs.VALUE_0
    target: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        judge: int | None | str | Unset
        if isinstance(self.judge, Unset):
            judge = UNSET
        else:
            judge = self.judge

        judge_version: int | None | Unset
        if isinstance(self.judge_version, Unset):
            judge_version = UNSET
        else:
            judge_version = self.judge_version

        dataset: int | None | Unset
        if isinstance(self.dataset, Unset):
            dataset = UNSET
        else:
            dataset = self.dataset

        values: str | Unset = UNSET
        if not isinstance(self.values, Unset):
            values = self.values.value

        scoring: str | Unset = UNSET
        if not isinstance(self.scoring, Unset):
            scoring = self.scoring.value

        sort = self.sort

        dir_: None | str | Unset
        if isinstance(self.dir_, Unset):
            dir_ = UNSET
        elif isinstance(self.dir_, BoardQueryDirType0):
            dir_ = self.dir_.value
        else:
            dir_ = self.dir_

        tag: None | str | Unset
        if isinstance(self.tag, Unset):
            tag = UNSET
        else:
            tag = self.tag

        common: str | Unset = UNSET
        if not isinstance(self.common, Unset):
            common = self.common.value

        cluster: None | str | Unset
        if isinstance(self.cluster, Unset):
            cluster = UNSET
        else:
            cluster = self.cluster

        epochs: None | str | Unset
        if isinstance(self.epochs, Unset):
            epochs = UNSET
        else:
            epochs = self.epochs

        correction: str | Unset = UNSET
        if not isinstance(self.correction, Unset):
            correction = self.correction.value

        pairs: str | Unset = UNSET
        if not isinstance(self.pairs, Unset):
            pairs = self.pairs.value

        target: float | None | Unset
        if isinstance(self.target, Unset):
            target = UNSET
        else:
            target = self.target

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if judge is not UNSET:
            field_dict["judge"] = judge
        if judge_version is not UNSET:
            field_dict["judge_version"] = judge_version
        if dataset is not UNSET:
            field_dict["dataset"] = dataset
        if values is not UNSET:
            field_dict["values"] = values
        if scoring is not UNSET:
            field_dict["scoring"] = scoring
        if sort is not UNSET:
            field_dict["sort"] = sort
        if dir_ is not UNSET:
            field_dict["dir"] = dir_
        if tag is not UNSET:
            field_dict["tag"] = tag
        if common is not UNSET:
            field_dict["common"] = common
        if cluster is not UNSET:
            field_dict["cluster"] = cluster
        if epochs is not UNSET:
            field_dict["epochs"] = epochs
        if correction is not UNSET:
            field_dict["correction"] = correction
        if pairs is not UNSET:
            field_dict["pairs"] = pairs
        if target is not UNSET:
            field_dict["target"] = target

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_judge(data: object) -> int | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | str | Unset, data)

        judge = _parse_judge(d.pop("judge", UNSET))

        def _parse_judge_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        judge_version = _parse_judge_version(d.pop("judge_version", UNSET))

        def _parse_dataset(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dataset = _parse_dataset(d.pop("dataset", UNSET))

        _values = d.pop("values", UNSET)
        values: BoardQueryValues | Unset
        if isinstance(_values, Unset):
            values = UNSET
        else:
            values = BoardQueryValues(_values)

        _scoring = d.pop("scoring", UNSET)
        scoring: BoardQueryScoring | Unset
        if isinstance(_scoring, Unset):
            scoring = UNSET
        else:
            scoring = BoardQueryScoring(_scoring)

        sort = d.pop("sort", UNSET)

        def _parse_dir_(data: object) -> BoardQueryDirType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                dir_type_0 = BoardQueryDirType0(data)

                return dir_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BoardQueryDirType0 | None | Unset, data)

        dir_ = _parse_dir_(d.pop("dir", UNSET))

        def _parse_tag(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tag = _parse_tag(d.pop("tag", UNSET))

        _common = d.pop("common", UNSET)
        common: BoardQueryCommon | Unset
        if isinstance(_common, Unset):
            common = UNSET
        else:
            common = BoardQueryCommon(_common)

        def _parse_cluster(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cluster = _parse_cluster(d.pop("cluster", UNSET))

        def _parse_epochs(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        epochs = _parse_epochs(d.pop("epochs", UNSET))

        _correction = d.pop("correction", UNSET)
        correction: BoardQueryCorrection | Unset
        if isinstance(_correction, Unset):
            correction = UNSET
        else:
            correction = BoardQueryCorrection(_correction)

        _pairs = d.pop("pairs", UNSET)
        pairs: BoardQueryPairs | Unset
        if isinstance(_pairs, Unset):
            pairs = UNSET
        else:
            pairs = BoardQueryPairs(_pairs)

        def _parse_target(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        target = _parse_target(d.pop("target", UNSET))

        board_query = cls(
            judge=judge,
            judge_version=judge_version,
            dataset=dataset,
            values=values,
            scoring=scoring,
            sort=sort,
            dir_=dir_,
            tag=tag,
            common=common,
            cluster=cluster,
            epochs=epochs,
            correction=correction,
            pairs=pairs,
            target=target,
        )

        board_query.additional_properties = d
        return board_query

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
