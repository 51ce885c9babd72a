from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.pairwise_board_out import PairwiseBoardOut
from ...models.pairwise_leaderboard_source import PairwiseLeaderboardSource
from ...types import UNSET, Response, Unset


def _get_kwargs(
    slug: str,
    *,
    judge: int | None | str | Unset = UNSET,
    source: PairwiseLeaderboardSource | Unset = PairwiseLeaderboardSource.JUDGE,
    baseline: int | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_judge: int | None | str | Unset
    if isinstance(judge, Unset):
        json_judge = UNSET
    else:
        json_judge = judge
    params["judge"] = json_judge

    json_source: str | Unset = UNSET
    if not isinstance(source, Unset):
        json_source = source.value

    params["source"] = json_source

    json_baseline: int | None | Unset
    if isinstance(baseline, Unset):
        json_baseline = UNSET
    else:
        json_baseline = baseline
    params["baseline"] = json_baseline

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/leaderboards/{slug}/pairwise/".format(
            slug=quote(str(slug), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | PairwiseBoardOut | None:
    if response.status_code == 200:
        response_200 = PairwiseBoardOut.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Error.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Error.from_dict(response.json())

        return response_404

    if response.status_code == 422:
        response_422 = Error.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | PairwiseBoardOut]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    source: PairwiseLeaderboardSource | Unset = PairwiseLeaderboardSource.JUDGE,
    baseline: int | None | Unset = UNSET,
) -> Response[Error | PairwiseBoardOut]:
    """A task's pairwise board

     Bradley–Terry ratings with bootstrap CIs from the pairwise runs, as the pairwise board
    page and its export give them (one record per model).

    Args:
        slug (str):
        judge (int | None | str | Unset):
        source (PairwiseLeaderboardSource | Unset):  Default: PairwiseLeaderboardSource.JUDGE.
        baseline (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | PairwiseBoardOut]
    """

    kwargs = _get_kwargs(
        slug=slug,
        judge=judge,
        source=source,
        baseline=baseline,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    source: PairwiseLeaderboardSource | Unset = PairwiseLeaderboardSource.JUDGE,
    baseline: int | None | Unset = UNSET,
) -> Error | PairwiseBoardOut | None:
    """A task's pairwise board

     Bradley–Terry ratings with bootstrap CIs from the pairwise runs, as the pairwise board
    page and its export give them (one record per model).

    Args:
        slug (str):
        judge (int | None | str | Unset):
        source (PairwiseLeaderboardSource | Unset):  Default: PairwiseLeaderboardSource.JUDGE.
        baseline (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | PairwiseBoardOut
    """

    return sync_detailed(
        slug=slug,
        client=client,
        judge=judge,
        source=source,
        baseline=baseline,
    ).parsed


async def asyncio_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    source: PairwiseLeaderboardSource | Unset = PairwiseLeaderboardSource.JUDGE,
    baseline: int | None | Unset = UNSET,
) -> Response[Error | PairwiseBoardOut]:
    """A task's pairwise board

     Bradley–Terry ratings with bootstrap CIs from the pairwise runs, as the pairwise board
    page and its export give them (one record per model).

    Args:
        slug (str):
        judge (int | None | str | Unset):
        source (PairwiseLeaderboardSource | Unset):  Default: PairwiseLeaderboardSource.JUDGE.
        baseline (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | PairwiseBoardOut]
    """

    kwargs = _get_kwargs(
        slug=slug,
        judge=judge,
        source=source,
        baseline=baseline,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    source: PairwiseLeaderboardSource | Unset = PairwiseLeaderboardSource.JUDGE,
    baseline: int | None | Unset = UNSET,
) -> Error | PairwiseBoardOut | None:
    """A task's pairwise board

     Bradley–Terry ratings with bootstrap CIs from the pairwise runs, as the pairwise board
    page and its export give them (one record per model).

    Args:
        slug (str):
        judge (int | None | str | Unset):
        source (PairwiseLeaderboardSource | Unset):  Default: PairwiseLeaderboardSource.JUDGE.
        baseline (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | PairwiseBoardOut
    """

    return (
        await asyncio_detailed(
            slug=slug,
            client=client,
            judge=judge,
            source=source,
            baseline=baseline,
        )
    ).parsed
