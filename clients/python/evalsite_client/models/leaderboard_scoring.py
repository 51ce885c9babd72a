from enum import StrEnum


class LeaderboardScoring(StrEnum):
    ANSWERED = "answered"
    STRICT = "strict"

    def __str__(self) -> str:
        return str(self.value)
