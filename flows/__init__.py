"""Prefect flows: one per stage and `pipeline` (all stages with the quality gates between).
Each task is a library function; flows only wire them."""
