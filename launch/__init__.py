"""Thin absl mains: flags → config → one library call; the logic lives in the importable library."""
