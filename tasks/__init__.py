"""Celery adapters over memworker: the app, its queues and beat schedule, and thin tasks."""
