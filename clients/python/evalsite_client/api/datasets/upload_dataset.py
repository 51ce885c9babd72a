from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.dataset_out import DatasetOut
from ...models.error import Error
from ...models.upload_dataset_multi_part_body_params import (
    UploadDatasetMultiPartBodyParams,
)
from ...types import Response


def _get_kwargs(
    slug: str,
    *,
    body: UploadDatasetMultiPartBodyParams,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/tasks/{slug}/datasets/".format(
            slug=quote(str(slug), safe=""),
        ),
    }

    _kwargs["files"] = body.to_multipart()

    headers["Content-Type"] = "multipart/form-data; boundary=+++"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> DatasetOut | Error | None:
    if response.status_code == 201:
        response_201 = DatasetOut.from_dict(response.json())

        return response_201

    if response.status_code == 202:
        response_202 = DatasetOut.from_dict(response.json())

        return response_202

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
) -> Response[DatasetOut | Error]:
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
    body: UploadDatasetMultiPartBodyParams,
) -> Response[DatasetOut | Error]:
    """Upload a dataset

     A CSV, JSON, JSONL, Excel or Parquet file (multipart field `file`), checked and
    imported as the upload page does: 201 with the dataset, or 202 while a big file imports
    in a worker (poll `GET /datasets/{id}/`). Errors name the file, row and column as the
    page does. (The file is a required multipart field: `File[UploadedFile] | None` made it
    a query parameter in the schema, which generated clients could not fill.)

    Args:
        slug (str):
        body (UploadDatasetMultiPartBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetOut | Error]
    """

    kwargs = _get_kwargs(
        slug=slug,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: UploadDatasetMultiPartBodyParams,
) -> DatasetOut | Error | None:
    """Upload a dataset

     A CSV, JSON, JSONL, Excel or Parquet file (multipart field `file`), checked and
    imported as the upload page does: 201 with the dataset, or 202 while a big file imports
    in a worker (poll `GET /datasets/{id}/`). Errors name the file, row and column as the
    page does. (The file is a required multipart field: `File[UploadedFile] | None` made it
    a query parameter in the schema, which generated clients could not fill.)

    Args:
        slug (str):
        body (UploadDatasetMultiPartBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetOut | Error
    """

    return sync_detailed(
        slug=slug,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: UploadDatasetMultiPartBodyParams,
) -> Response[DatasetOut | Error]:
    """Upload a dataset

     A CSV, JSON, JSONL, Excel or Parquet file (multipart field `file`), checked and
    imported as the upload page does: 201 with the dataset, or 202 while a big file imports
    in a worker (poll `GET /datasets/{id}/`). Errors name the file, row and column as the
    page does. (The file is a required multipart field: `File[UploadedFile] | None` made it
    a query parameter in the schema, which generated clients could not fill.)

    Args:
        slug (str):
        body (UploadDatasetMultiPartBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetOut | Error]
    """

    kwargs = _get_kwargs(
        slug=slug,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: UploadDatasetMultiPartBodyParams,
) -> DatasetOut | Error | None:
    """Upload a dataset

     A CSV, JSON, JSONL, Excel or Parquet file (multipart field `file`), checked and
    imported as the upload page does: 201 with the dataset, or 202 while a big file imports
    in a worker (poll `GET /datasets/{id}/`). Errors name the file, row and column as the
    page does. (The file is a required multipart field: `File[UploadedFile] | None` made it
    a query parameter in the schema, which generated clients could not fill.)

    Args:
        slug (str):
        body (UploadDatasetMultiPartBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetOut | Error
    """

    return (
        await asyncio_detailed(
            slug=slug,
            client=client,
            body=body,
        )
    ).parsed
