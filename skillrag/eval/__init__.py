"""Metrics, the resumable runner and cost accounting."""
