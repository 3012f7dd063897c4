"""Seams for tests only. Inert unless a test sets their environment variables."""
