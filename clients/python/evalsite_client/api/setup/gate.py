from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.gate_in import GateIn
from ...models.gate_out import GateOut
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: GateIn,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/gate/",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> GateOut | Problem | None:
    if response.status_code == 200:
        response_200 = GateOut.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = GateOut.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[GateOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: GateIn,
) -> Response[GateOut | Problem]:
    """Gate

     `manage.py gate` in one call: 200 with the verdict, its exit code, the Markdown summary
    and the JUnit XML; or 202 while a judge run is not finished (one is started on the task's
    default judge for a run of answers that has none): ask again.

    Args:
        body (GateIn):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GateOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: GateIn,
) -> GateOut | Problem | None:
    """Gate

     `manage.py gate` in one call: 200 with the verdict, its exit code, the Markdown summary
    and the JUnit XML; or 202 while a judge run is not finished (one is started on the task's
    default judge for a run of answers that has none): ask again.

    Args:
        body (GateIn):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GateOut | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: GateIn,
) -> Response[GateOut | Problem]:
    """Gate

     `manage.py gate` in one call: 200 with the verdict, its exit code, the Markdown summary
    and the JUnit XML; or 202 while a judge run is not finished (one is started on the task's
    default judge for a run of answers that has none): ask again.

    Args:
        body (GateIn):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GateOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: GateIn,
) -> GateOut | Problem | None:
    """Gate

     `manage.py gate` in one call: 200 with the verdict, its exit code, the Markdown summary
    and the JUnit XML; or 202 while a judge run is not finished (one is started on the task's
    default judge for a run of answers that has none): ask again.

    Args:
        body (GateIn):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GateOut | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
