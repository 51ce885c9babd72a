from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.failed_items_kind import FailedItemsKind
from ...models.failed_out import FailedOut
from ...types import UNSET, Response, Unset


def _get_kwargs(
    pk: int,
    *,
    kind: FailedItemsKind | Unset = FailedItemsKind.VALUE_0,
    page: int | Unset = 1,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_kind: str | Unset = UNSET
    if not isinstance(kind, Unset):
        json_kind = kind.value

    params["kind"] = json_kind

    params["page"] = page

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/runs/{pk}/failed/".format(
            pk=quote(str(pk), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | FailedOut | None:
    if response.status_code == 200:
        response_200 = FailedOut.from_dict(response.json())

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
) -> Response[Error | FailedOut]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    pk: int,
    *,
    client: AuthenticatedClient,
    kind: FailedItemsKind | Unset = FailedItemsKind.VALUE_0,
    page: int | Unset = 1,
) -> Response[Error | FailedOut]:
    """A run's failed items

     A judge run's failed items grouped by error kind, with each failed round's error, raw
    reply and the messages sent (the failed items page); a generation run's failed responses
    (its page's "failed" filter); a pairwise run's failed comparisons, a pair of an item per
    entry with both orders as rounds. 100 a page.

    Args:
        pk (int):
        kind (FailedItemsKind | Unset):  Default: FailedItemsKind.VALUE_0.
        page (int | Unset):  Default: 1.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | FailedOut]
    """

    kwargs = _get_kwargs(
        pk=pk,
        kind=kind,
        page=page,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    pk: int,
    *,
    client: AuthenticatedClient,
    kind: FailedItemsKind | Unset = FailedItemsKind.VALUE_0,
    page: int | Unset = 1,
) -> Error | FailedOut | None:
    """A run's failed items

     A judge run's failed items grouped by error kind, with each failed round's error, raw
    reply and the messages sent (the failed items page); a generation run's failed responses
    (its page's "failed" filter); a pairwise run's failed comparisons, a pair of an item per
    entry with both orders as rounds. 100 a page.

    Args:
        pk (int):
        kind (FailedItemsKind | Unset):  Default: FailedItemsKind.VALUE_0.
        page (int | Unset):  Default: 1.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | FailedOut
    """

    return sync_detailed(
        pk=pk,
        client=client,
        kind=kind,
        page=page,
    ).parsed


async def asyncio_detailed(
    pk: int,
    *,
    client: AuthenticatedClient,
    kind: FailedItemsKind | Unset = FailedItemsKind.VALUE_0,
    page: int | Unset = 1,
) -> Response[Error | FailedOut]:
    """A run's failed items

     A judge run's failed items grouped by error kind, with each failed round's error, raw
    reply and the messages sent (the failed items page); a generation run's failed responses
    (its page's "failed" filter); a pairwise run's failed comparisons, a pair of an item per
    entry with both orders as rounds. 100 a page.

    Args:
        pk (int):
        kind (FailedItemsKind | Unset):  Default: FailedItemsKind.VALUE_0.
        page (int | Unset):  Default: 1.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | FailedOut]
    """

    kwargs = _get_kwargs(
        pk=pk,
        kind=kind,
        page=page,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    pk: int,
    *,
    client: AuthenticatedClient,
    kind: FailedItemsKind | Unset = FailedItemsKind.VALUE_0,
    page: int | Unset = 1,
) -> Error | FailedOut | None:
    """A run's failed items

     A judge run's failed items grouped by error kind, with each failed round's error, raw
    reply and the messages sent (the failed items page); a generation run's failed responses
    (its page's "failed" filter); a pairwise run's failed comparisons, a pair of an item per
    entry with both orders as rounds. 100 a page.

    Args:
        pk (int):
        kind (FailedItemsKind | Unset):  Default: FailedItemsKind.VALUE_0.
        page (int | Unset):  Default: 1.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | FailedOut
    """

    return (
        await asyncio_detailed(
            pk=pk,
            client=client,
            kind=kind,
            page=page,
        )
    ).parsed
