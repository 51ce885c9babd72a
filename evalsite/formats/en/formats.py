# One way to write a moment everywhere (pages, lists, histories): 2026-11-23 09:26, in TIME_ZONE.
# Templates write {{ value|date:"DATETIME_FORMAT" }}, or just {{ value }}.
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
