"""Skill-RAG: failure-state-aware retrieval augmentation via hidden-state probing and skill routing."""

__version__ = "0.1.0"
