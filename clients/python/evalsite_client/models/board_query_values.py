from enum import StrEnum


class BoardQueryValues(StrEnum):
    BOTH = "both"
    HUMAN = "human"
    JUDGE = "judge"

    def __str__(self) -> str:
        return str(self.value)
