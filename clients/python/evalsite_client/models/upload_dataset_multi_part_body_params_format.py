from enum import StrEnum


class UploadDatasetMultiPartBodyParamsFormat(StrEnum):
    CSV = "csv"
    JSON = "json"
    JSONL = "jsonl"
    PARQUET = "parquet"
    VALUE_0 = ""
    XLSX = "xlsx"

    def __str__(self) -> str:
        return str(self.value)
