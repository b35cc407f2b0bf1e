"""History: the records of each change, a file's versions as entries, restore and redact."""
