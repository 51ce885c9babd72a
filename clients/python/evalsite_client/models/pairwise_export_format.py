from enum import StrEnum


class PairwiseExportFormat(StrEnum):
    CSV = "csv"
    JSONL = "jsonl"
    PARQUET = "parquet"
    XLSX = "xlsx"

    def __str__(self) -> str:
        return str(self.value)
