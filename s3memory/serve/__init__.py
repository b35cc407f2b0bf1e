"""``s3memory serve``: Anthropic's memory-store API (``/v1/memory_stores``) over s3memory's
encrypted stores, for the SDK's own client (``client.beta.memory_stores``) unmodified.

``http`` holds the framework-free request, answer and error; ``api`` the routes and their
logic; ``registry`` the stores; ``app`` the ASGI face and its server (the ``serve`` extra).
"""
