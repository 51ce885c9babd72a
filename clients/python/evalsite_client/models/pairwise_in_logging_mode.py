from enum import StrEnum


class PairwiseInLoggingMode(StrEnum):
    ALL = "all"
    FAILED = "failed"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
