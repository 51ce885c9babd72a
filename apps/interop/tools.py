"""The importers by tool, and their way back out: one entry per tool that apps/interop reads."""

import json
from collections.abc import Callable
from typing import Any

from apps.datasets.models import Task
from apps.interop import inspect_logs, lm_eval, openai_evals, promptfoo
from apps.interop.models import Import, ImportedLog
from apps.interop.results import ImportError_, Results, store

# tool → reads [(file name, bytes)] (and a dataset name) into Results
READERS: dict[str, Callable[[list[tuple[str, bytes]], str], Results]] = {
    Import.Tool.INSPECT: inspect_logs.read_logs,
    Import.Tool.PROMPTFOO: promptfoo.read_results,
    Import.Tool.LM_EVAL: lm_eval.read_samples,
    Import.Tool.OPENAI: openai_evals.read_logs,
}
# tool → (the reviewed file of one response set, its file name)
WRITERS: dict[str, tuple[Callable[[ImportedLog], Any], Callable[[ImportedLog], str]]] = {
    Import.Tool.INSPECT: (inspect_logs.export_log, inspect_logs.export_name),
    Import.Tool.PROMPTFOO: (promptfoo.export_results, promptfoo.export_name),
}
# tool → the reviewed files of one response set, when the tool's output is several files
FILE_WRITERS: dict[str, Callable[[ImportedLog], list[tuple[str, bytes]]]] = {
    Import.Tool.LM_EVAL: lm_eval.export_files,
    Import.Tool.OPENAI: openai_evals.export_files,
}


def import_files(
    task: Task, tool: str, files: list[tuple[str, bytes]], user: Any = None, name: str = ""
) -> Import:
    """Read and store one tool's files, all or nothing (ImportError_ names file and sample)."""
    if tool not in READERS:
        known = ", ".join(READERS)
        raise ImportError_(f"Unknown tool {tool!r}; this evalsite imports {known}.")
    return store(task, READERS[tool](files, name), user)


def export_reviewed(log: ImportedLog) -> list[tuple[str, bytes]]:
    """[(file name, content)] of a response set's results in its tool's shape, with the
    scores people left (a name may have a folder: lm-eval's `<model>/samples_…`)."""
    if log.source.tool in FILE_WRITERS:
        return FILE_WRITERS[log.source.tool](log)
    if log.source.tool not in WRITERS:
        raise ImportError_(
            f"{log.source.get_tool_display()} results cannot be written back out yet."
        )
    write, name = WRITERS[log.source.tool]
    return [(name(log), json.dumps(write(log), ensure_ascii=False).encode())]
