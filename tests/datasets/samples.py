"""The four file shapes of issue 3, and small helpers to build files and uploads from them."""

import json

# MMLU-style CSV saved from a spreadsheet: BOM, quoted commas, a quoted newline, Chinese text,
# values that must stay text ("007", "NA"), formula-like cells, and a response column.
MMLU_CSV = (
    "\ufeffquestion,A,B,C,D,answer,response\r\n"
    '"Which is prime, given ""primes"" are odd?",4,6,7,9,C,"The answer is C.\r\nBecause 7 is prime."\r\n'
    "中国的首都是哪里？,上海,北京,广州,深圳,B,答案是B\r\n"
    "007,NA,=1+1,-3,@SUM(A1),A,\"+cmd|' /C calc'!A0\"\r\n"
).encode("utf-8")

INSTRUCTION_ROWS = [
    {
        "instruction": "Translate to French",
        "input": "Good morning",
        "output": "Bonjour",
        "history": [["Hi", "Salut"], ["Thanks", "Merci"]],
        "response": "Bonjour !",
    },
    {
        "instruction": "写一首诗",
        "input": "",
        "output": "床前明月光",
        "history": [],
        "response": "<script>alert('x')</script>",
    },
]
INSTRUCTION_JSONL = "".join(
    json.dumps(row, ensure_ascii=False) + "\n" for row in INSTRUCTION_ROWS
).encode()

JSON_ROWS = [
    {"id": 1, "question": "2+2?", "answers": ["4", "four"], "meta": {"source": "arith"}},
    {"id": 2, "question": "Capital of Peru?", "answers": ["Lima"], "meta": {"source": "geo"}},
    {"id": 3, "question": "Opposite of hot?", "answers": ["cold"], "meta": None},
]
JSON_ARRAY = json.dumps(JSON_ROWS, indent=2).encode()

NLI_ROWS = [
    {"uid": "n-1", "premise": "A man plays guitar.", "hypothesis": "A man makes music.",
     "label": "entailment", "tags": ["music", "easy"]},
    {"uid": "n-2", "premise": "A cat sleeps.", "hypothesis": "A dog barks.",
     "label": "neutral", "tags": ["animals"]},
    {"uid": "n-3", "premise": "It rains.", "hypothesis": "It is dry.",
     "label": "contradiction", "tags": ["weather", "easy"]},
]  # fmt: skip
NLI_JSONL = "".join(json.dumps(row) + "\n" for row in NLI_ROWS).encode()


def csv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def numbered_csv(count: int, tags: tuple[str, ...] = ("math", "history;hard")) -> bytes:
    """`count` rows: id, question, answer, tags (rotating through `tags`)."""
    return csv_bytes(
        ["id", "question", "answer", "tags"],
        [[f"q{i:04d}", f"Question number {i}", f"answer {i}", tags[i % len(tags)]] for i in range(count)],
    )  # fmt: skip


def xlsx_bytes(sheets: dict[str, list[list]], formats: dict[str, str] | None = None) -> bytes:
    """A real workbook written by openpyxl: one sheet per entry, rows from A1 (None: an empty
    cell, [] a blank row); `formats` sets number formats of cells such as {"B2": "0%"}."""
    import io

    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
        for cell, number_format in (formats or {}).items():
            sheet[cell].number_format = number_format
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def parquet_bytes(columns: dict[str, object]) -> bytes:
    """A real Parquet file written by pyarrow from {name: pyarrow array or list}."""
    import io

    import pyarrow
    import pyarrow.parquet

    out = io.BytesIO()
    pyarrow.parquet.write_table(pyarrow.table(columns), out)
    return out.getvalue()
