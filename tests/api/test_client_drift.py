"""#30.8: the committed Python client (clients/python/evalsite_client) is what
openapi-python-client makes of the API's schema today, so a change to the API that forgets to
regenerate it fails here (clients/python/README.md says how to regenerate)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from apps.api.api import api
from tests.base import ROOT

CLIENT = ROOT / "clients" / "python"
BIN = Path(sys.executable).parent  # the test venv's, where openapi-python-client and ruff are


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and ".ruff_cache" not in path.parts
    }


def test_the_committed_client_is_generated_from_the_current_schema(tmp_path):
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(api.get_openapi_schema(), default=str))
    out = tmp_path / "evalsite_client"
    done = subprocess.run(
        [
            str(BIN / "openapi-python-client"),
            "generate",
            "--path",
            str(schema),
            "--config",
            str(CLIENT / "openapi-python-client.yml"),
            "--meta",
            "none",
            "--output-path",
            str(out),
        ],
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    generated, committed = tree(out), tree(CLIENT / "evalsite_client")
    assert len(generated) > 50  # a whole client, not an empty directory
    stale = sorted(
        name
        for name in generated.keys() | committed.keys()
        if generated.get(name) != committed.get(name)
    )
    assert not stale, f"regenerate clients/python (its README): these differ: {stale}"
