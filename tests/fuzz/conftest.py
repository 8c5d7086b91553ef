import sys
from pathlib import Path

# The strategies and the contract live beside the tests (benchmarks/fuzz.py imports them too).
sys.path.insert(0, str(Path(__file__).parent))
