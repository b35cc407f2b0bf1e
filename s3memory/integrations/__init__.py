"""Adapters for agent frameworks, one module each, each behind its own extra.

``import s3memory`` never imports this package: each framework costs 0.3-0.7 s to import,
which a Lambda cold start would pay. Import the module of the framework you use::

    from s3memory.integrations.deepagents import S3MemoryBackend
"""
