"""Everything between plaintext and stored bytes: the envelope, keys, names, provenance, sealed files."""
