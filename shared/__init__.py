"""poimen-memory's domain core: everything the API, the workers and the CLI share.

Nothing in here imports from ``api``, ``workers`` or ``cli``; data flows one way.
"""
