"""WSGI entry point for production servers: ``gunicorn api.wsgi:app``."""

from api.app import create_app

app = create_app()
