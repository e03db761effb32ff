"""Celery workers: the app and one thin task module per queue. Logic lives in ``shared``."""
