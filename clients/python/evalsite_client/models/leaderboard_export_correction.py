from enum import StrEnum


class LeaderboardExportCorrection(StrEnum):
    BH = "bh"
    HOLM = "holm"

    def __str__(self) -> str:
        return str(self.value)
