"""Hypothesis keeps its example database and caches in a temporary folder: tests write nothing into the checkout."""

import atexit
import shutil
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="eval-platform-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
