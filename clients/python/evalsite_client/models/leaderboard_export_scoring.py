from enum import StrEnum


class LeaderboardExportScoring(StrEnum):
    ANSWERED = "answered"
    STRICT = "strict"

    def __str__(self) -> str:
        return str(self.value)
