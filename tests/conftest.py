import sys
from pathlib import Path

# Let tests import the shared harness modules that live beside them.
sys.path.insert(0, str(Path(__file__).parent))
