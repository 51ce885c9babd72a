from enum import StrEnum


class SimulationRunInLoggingMode(StrEnum):
    ALL = "all"
    FAILED = "failed"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
