from enum import StrEnum


class ResumeRunRelaunchInMode(StrEnum):
    OVERWRITE = "overwrite"
    RESUME = "resume"
    RETRY_FAILED = "retry_failed"

    def __str__(self) -> str:
        return str(self.value)
