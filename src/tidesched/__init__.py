"""tidesched: a Volcano-compatible batch scheduler for Kubernetes GPU/NPU clusters."""

__version__ = "0.1.0"
