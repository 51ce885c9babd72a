from enum import StrEnum


class BoardQueryCorrection(StrEnum):
    BH = "bh"
    HOLM = "holm"

    def __str__(self) -> str:
        return str(self.value)
