"""Fixtures for the agents tests (no network, no Django)."""
