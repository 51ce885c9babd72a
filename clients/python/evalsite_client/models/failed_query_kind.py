from enum import StrEnum


class FailedQueryKind(StrEnum):
    API_ERROR = "api_error"
    INTERNAL = "internal"
    MISSING_SUBJECT = "missing_subject"
    NO_RESPONSE = "no_response"
    OUT_OF_RANGE = "out_of_range"
    TEMPLATE = "template"
    TIMEOUT = "timeout"
    UNPARSEABLE = "unparseable"
    VALUE_0 = ""

    def __str__(self) -> str:
        return str(self.value)
