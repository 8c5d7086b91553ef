import sys
from pathlib import Path

# Let tests import the shared harness modules that live beside them.
sys.path.insert(0, str(Path(__file__).parent))

# CI runs every property test on hypothesis's fixed examples, so a submission's result does not
# depend on the draw; new inputs are explored by hand (benchmarks/fuzz.py, benchmarks/chaos.py,
# or a local run without CI set).
import os  # noqa: E402

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
