from enum import StrEnum


class LeaderboardExportCommon(StrEnum):
    VALUE_0 = ""
    VALUE_1 = "0"
    VALUE_2 = "1"

    def __str__(self) -> str:
        return str(self.value)
