"""Thin absl mains: flags → config → one library call (STYLE §1)."""
