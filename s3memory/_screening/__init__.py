"""The text screens: pure functions from text to findings (secrets, instructions)."""
