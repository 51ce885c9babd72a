"""#26.7: a process that starts Django (every worker, work horse and manage.py command a test or a
user starts) does not import the heavy libraries before it uses them. scipy.stats, sacrebleu,
pyarrow, openpyxl and pandas took ~1 s of CPU per start, hundreds of starts per test stage; one
module importing one of them at its top brought the cost back unseen (it happened once, through
the jobs a worker preloads). Pages import them when their views load, once per web process."""

import json
import subprocess
import sys

from tests.base import ROOT, subprocess_env

HEAVY = ("scipy", "sacrebleu", "pyarrow", "openpyxl", "pandas", "sklearn", "statsmodels")

PROBE = """
import json, sys
import django
django.setup()  # as manage.py rqworker does; apps.runs' ready() preloads every run kind
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_starting_django_imports_no_heavy_library():
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "apps" in loaded and "django" in loaded  # the probe did start Django
    assert sorted(loaded & set(HEAVY)) == []
