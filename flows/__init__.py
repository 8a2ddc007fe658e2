"""Prefect flows: one per stage, `pipeline` (all stages with the quality gates between) and a
scheduled re-evaluation. Each task is a library function; flows only wire them."""
